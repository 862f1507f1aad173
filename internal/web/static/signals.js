// The signals the product page sends with a grab, for the risk model: a summary of the pointer
// or touch movement between the page's load and the click, and a device fingerprint. Nothing
// leaves the page but these few numbers: no path, no keystroke, no third party. The fingerprint
// is a hash of what the browser tells any page (user agent, languages, platform, cores, memory,
// touch points, screen, pixel ratio, time zone): a hint that many accounts share one device,
// not an identity, and it changes with the browser's version or the screen.
"use strict";

const seckillSignals = (() => {
  const SECTORS = 8;
  let moves = 0, path = 0, touch = false;
  let last = null;          // the previous point: {x, y, t}
  let heading = null;       // the previous move's direction, radians
  const turns = new Array(SECTORS).fill(0);
  let turnCount = 0;
  // The speed's running mean and spread (Welford), px per ms.
  let speeds = 0, mean = 0, m2 = 0;

  function moved(x, y, t, isTouch) {
    if (isTouch) touch = true;
    if (last) {
      const dx = x - last.x, dy = y - last.y, dt = t - last.t;
      const d = Math.hypot(dx, dy);
      if (d > 0) {
        moves++;
        path += d;
        const dir = Math.atan2(dy, dx);
        if (heading !== null) {
          let turn = dir - heading; // into (-π, π]
          while (turn <= -Math.PI) turn += 2 * Math.PI;
          while (turn > Math.PI) turn -= 2 * Math.PI;
          turns[Math.min(SECTORS - 1, Math.floor((turn + Math.PI) / (2 * Math.PI / SECTORS)))]++;
          turnCount++;
        }
        heading = dir;
        if (dt > 0) {
          const v = d / dt;
          speeds++;
          const delta = v - mean;
          mean += delta / speeds;
          m2 += delta * (v - mean);
        }
      }
    }
    last = { x, y, t };
  }

  addEventListener("pointermove", (e) => moved(e.clientX, e.clientY, e.timeStamp, e.pointerType === "touch"), { passive: true });
  addEventListener("touchmove", (e) => {
    const p = e.touches[0];
    if (p) moved(p.clientX, p.clientY, e.timeStamp, true);
  }, { passive: true });

  function entropy() {
    let h = 0;
    for (const n of turns) {
      if (n > 0) {
        const p = n / turnCount;
        h -= p * Math.log2(p);
      }
    }
    return Math.min(3, Math.max(0, h));
  }

  // fnv64 is the 64-bit FNV-1a hash of text, as 16 hex digits.
  function fnv64(text) {
    let h = 0xcbf29ce484222325n;
    const bytes = new TextEncoder().encode(text);
    for (const b of bytes) {
      h ^= BigInt(b);
      h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
    }
    return h.toString(16).padStart(16, "0");
  }

  let print = "";
  function fingerprint() {
    if (print) return print;
    try {
      const n = navigator, s = screen;
      print = fnv64([n.userAgent, n.language, (n.languages || []).join(","), n.platform, n.hardwareConcurrency,
        n.deviceMemory || "", n.maxTouchPoints, s.width + "x" + s.height + "x" + s.colorDepth, devicePixelRatio,
        Intl.DateTimeFormat().resolvedOptions().timeZone].join("|"));
    } catch (_) {
      print = ""; // a browser that hides these: no fingerprint, which the server accepts
    }
    return print;
  }

  // collect returns the signals of a click at clickedAt (performance.now() of the click).
  function collect(clickedAt) {
    const round = (v, d) => Math.round(v * d) / d;
    const cv = speeds > 1 && mean > 0 ? Math.sqrt(m2 / (speeds - 1)) / mean : 0;
    const out = {
      moves: Math.min(moves, 1000000),
      path_px: round(Math.min(path, 1e8), 10),
      direction_entropy: round(entropy(), 1000),
      speed_cv: round(Math.min(cv, 1000), 1000),
      touch,
      load_to_click_ms: Math.max(0, Math.min(Math.round(clickedAt), 86400000)),
    };
    const fp = fingerprint();
    if (fp) out.fingerprint = fp;
    return out;
  }

  return { collect };
})();
