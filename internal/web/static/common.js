// What every page shares: the API call, the server clock, the signed-in user, formatting.
"use strict";

const seckill = (() => {
  // api calls the JSON API and resolves to {status, body, headers}; it never throws for an HTTP
  // status, only for a network failure (then status is 0 and body.error.code is NETWORK).
  async function api(method, path, opts = {}) {
    const headers = { Accept: "application/json" };
    if (opts.token) headers.Authorization = "Bearer " + opts.token;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    Object.assign(headers, opts.headers || {});
    let resp;
    try {
      resp = await fetch(path, {
        method, headers, cache: "no-store",
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      });
    } catch (e) {
      return { status: 0, headers: new Headers(), body: { error: { code: "NETWORK", message: String(e) } } };
    }
    let body = null;
    try { body = await resp.json(); } catch (_) { body = null; }
    return { status: resp.status, headers: resp.headers, body };
  }

  function errorCode(r) {
    return (r.body && r.body.error && r.body.error.code) || "";
  }

  // Clock is the server's clock as seen from here: a few readings of /api/time, each corrected
  // by half its round trip, keeping the one with the shortest trip (the least uncertain).
  const clock = {
    offset: 0, // server minus local, in ms
    rtt: Infinity,
    async sync(samples = 3) {
      for (let i = 0; i < samples; i++) {
        const t0 = performance.now();
        const r = await api("GET", "/api/time");
        const t1 = performance.now();
        if (r.status !== 200) continue;
        const rtt = t1 - t0;
        if (rtt < this.rtt) {
          this.rtt = rtt;
          // The server read its clock about half a round trip before the answer arrived.
          this.offset = r.body.now_ms + rtt / 2 - (performance.timeOrigin + t1);
        }
      }
      return this.offset;
    },
    now() { return performance.timeOrigin + performance.now() + this.offset; },
  };

  // The signed-in user lives in localStorage: a demo login lasts a day.
  const session = {
    get() {
      try { return JSON.parse(localStorage.getItem("seckill.user") || "null"); } catch (_) { return null; }
    },
    set(user, token, expiresAt) {
      localStorage.setItem("seckill.user", JSON.stringify({ user, token, expiresAt }));
    },
    clear() { localStorage.removeItem("seckill.user"); },
    valid() {
      const s = this.get();
      return s && s.token && (!s.expiresAt || Date.parse(s.expiresAt) > Date.now()) ? s : null;
    },
  };

  // login is the demo mode's dev login; it resolves to an error message, or "" when signed in.
  async function login(user) {
    const r = await api("POST", "/api/login", { body: { user } });
    if (r.status === 200) {
      session.set(r.body.user, r.body.token, r.body.expires_at);
      return "";
    }
    if (r.status === 404) return "This server has no demo login: sign in through your site.";
    return (r.body && r.body.error && r.body.error.message) || "Sign-in failed (" + r.status + ").";
  }

  function money(cents) {
    if (cents === undefined || cents === null) return "–";
    const neg = cents < 0;
    const abs = Math.abs(cents);
    const s = Math.floor(abs / 100).toLocaleString("en-US") + "." + String(abs % 100).padStart(2, "0");
    return (neg ? "-" : "") + s;
  }

  // span formats milliseconds as a clock: [Nd ]HH:MM:SS.
  function span(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(total / 86400);
    const h = Math.floor(total % 86400 / 3600);
    const m = Math.floor(total % 3600 / 60);
    const s = total % 60;
    const two = (n) => String(n).padStart(2, "0");
    return (d > 0 ? d + "d " : "") + two(h) + ":" + two(m) + ":" + two(s);
  }

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }

  // randomKey makes an Idempotency-Key.
  function randomKey() {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // renderSession shows who is signed in (with a sign-out button) in the page's header.
  function renderSession(box, onChange) {
    box.replaceChildren();
    const s = session.valid();
    if (!s) return;
    const out = el("button", { type: "button", text: "Sign out" });
    out.addEventListener("click", () => { session.clear(); onChange(); });
    box.append(el("span", { text: "Signed in as " + s.user }), out);
  }

  return { api, errorCode, clock, session, login, money, span, $, el, randomKey, renderSession };
})();
