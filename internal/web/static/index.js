// The front page: every activity that has not ended, soonest first, each linking to its page.
"use strict";

(() => {
  const { api, clock, money, span, $, el } = seckill;
  let list = [];

  function describe(a) {
    if (a.kind === "redpacket") return "Red packet · " + a.stock + " shares of " + money(a.total_cents);
    return money(a.price_cents) + " · " + a.stock + " in stock";
  }

  function when(a) {
    const now = clock.now();
    const start = Date.parse(a.start_at);
    const end = Date.parse(a.end_at);
    if (now < start) return "starts in " + span(start - now);
    if (now < end) return "ends in " + span(end - now);
    return "ended";
  }

  function status(a) {
    const now = clock.now();
    if (now >= Date.parse(a.end_at)) return "ended";
    if (a.status === "sold_out") return "sold_out";
    return now < Date.parse(a.start_at) ? "upcoming" : "active";
  }

  function render() {
    const ul = $("activities");
    ul.replaceChildren(...list.map((a) => {
      const st = status(a);
      return el("li", {}, el("a", { href: "/activity/" + encodeURIComponent(a.id) },
        el("div", { class: "card" },
          el("h2", { text: a.name }),
          el("p", {}, el("span", { class: "badge " + st, text: st.replace("_", " ") }), " ", describe(a)),
          el("p", { class: "muted", "data-when": a.id, text: when(a) }))));
    }));
    $("state").textContent = list.length ? "" : "No sales right now.";
  }

  async function load() {
    const r = await api("GET", "/api/activities");
    if (r.status !== 200) {
      $("state").textContent = "Could not load the sales (" + (seckill.errorCode(r) || r.status) + ").";
      return;
    }
    list = r.body.activities;
    render();
  }

  async function main() {
    await clock.sync();
    await load();
    setInterval(() => {
      for (const a of list) {
        const p = document.querySelector('[data-when="' + CSS.escape(a.id) + '"]');
        if (p) p.textContent = when(a);
      }
    }, 1000);
    setInterval(load, 15000);
  }
  main();
})();
