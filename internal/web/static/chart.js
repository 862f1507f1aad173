// A small line chart on a canvas: a few series over the same x, the y axis from zero to the
// largest value, a legend. Enough for the dashboard's last minute; no library needed.
"use strict";

const lineChart = (() => {
  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // draw paints series ([{label, color, values}]) on canvas; fmt formats the axis values.
  function draw(canvas, series, fmt = String) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 52, right = 8, top = 22, bottom = 18;
    const n = Math.max(...series.map((s) => s.values.length), 2);
    const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values)));
    const x = (i) => left + (w - left - right) * i / (n - 1);
    const y = (v) => top + (h - top - bottom) * (1 - v / max);

    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#4d5661";
    g.strokeStyle = "#d5dae0";
    g.lineWidth = 1;
    for (const f of [0, 0.5, 1]) {
      const yy = Math.round(y(max * f)) + 0.5;
      g.beginPath(); g.moveTo(left, yy); g.lineTo(w - right, yy); g.stroke();
      g.textAlign = "right"; g.textBaseline = "middle";
      g.fillText(fmt(max * f), left - 6, yy);
    }
    g.textAlign = "left"; g.textBaseline = "alphabetic";
    g.fillText("-60 s", left, h - 4);
    g.textAlign = "right";
    g.fillText("now", w - right, h - 4);

    let lx = left;
    for (const s of series) {
      g.strokeStyle = s.color; g.lineWidth = 2;
      g.beginPath();
      s.values.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
      g.stroke();
      g.fillStyle = s.color; g.fillRect(lx, 6, 10, 10);
      g.fillStyle = "#1b1f24"; g.textAlign = "left"; g.textBaseline = "middle";
      g.fillText(s.label, lx + 14, 11);
      lx += 24 + g.measureText(s.label).width;
    }
  }
  return { draw };
})();
