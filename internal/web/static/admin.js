// The admin dashboard: the token (kept in this tab only), a live view of one activity over
// Server-Sent Events with the operator's controls (reconcile, add stock, end, export), the
// support desk (a user's orders, dead letters, parked events, refunds to make), and the form that
// creates activities.
"use strict";

(() => {
  const { api, errorCode, money, $, el } = seckill;
  const TOKEN = "seckill.admin";
  let stream = null; // the AbortController of the open live stream
  let features = {}; // what this node serves (GET /api/admin/features): no route for the rest

  const token = () => sessionStorage.getItem(TOKEN) || "";

  // ---- the token ----

  async function open(ev) {
    if (ev) ev.preventDefault();
    const t = ev ? $("token").value.trim() : token();
    if (!t) return;
    const r = await api("GET", "/api/admin/features", { token: t });
    if (r.status !== 200) {
      sessionStorage.removeItem(TOKEN);
      $("auth-error").textContent = r.status === 401 ? "That token is not the admin token." :
        "Could not check the token (" + (errorCode(r) || r.status) + ").";
      return;
    }
    features = r.body;
    sessionStorage.setItem(TOKEN, t);
    $("token").value = "";
    $("auth-error").textContent = "";
    $("auth").hidden = true;
    $("desk").hidden = false;
    $("logout").hidden = false;
    await loadList();
    await loadSupport();
  }

  function forget() {
    sessionStorage.removeItem(TOKEN);
    if (stream) stream.abort();
    $("desk").hidden = true;
    $("logout").hidden = true;
    $("auth").hidden = false;
  }

  // ---- the activity picker ----

  async function loadList(select) {
    const r = await api("GET", "/api/admin/activities", { token: token() }); // ended ones too
    if (r.status !== 200) return;
    const pick = $("pick");
    const keep = select || pick.value;
    pick.replaceChildren(el("option", { value: "", text: "— choose an activity —" }),
      ...r.body.activities.map((a) => el("option", { value: a.id, text: a.name + " (" + a.id + ", " + a.status + ")" })));
    if (keep && [...pick.options].some((o) => o.value === keep)) pick.value = keep;
    watch(pick.value);
  }

  // ---- the live view ----

  let watching = "";

  function watch(id) {
    if (id === watching) return;
    watching = id;
    if (stream) stream.abort();
    $("live").hidden = !id;
    $("reconcile-result").textContent = "";
    $("operate-result").textContent = "";
    if (!id) return;
    $("live-title").textContent = "Live: " + id;
    stream = new AbortController();
    listen(id, stream.signal);
  }

  // listen reads the activity's event stream (with fetch: EventSource cannot send the token) and
  // reconnects after a pause when it breaks, until aborted.
  async function listen(id, signal) {
    while (!signal.aborted) {
      try {
        const resp = await fetch("/api/admin/activities/" + encodeURIComponent(id) + "/events", {
          headers: { Authorization: "Bearer " + token(), Accept: "text/event-stream" }, signal, cache: "no-store",
        });
        if (resp.status === 401) { forget(); return; }
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        $("live-state").textContent = "Live: updated every second.";
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let name = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) name = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (name === "stats" && data) show(JSON.parse(data));
          }
        }
      } catch (e) {
        if (signal.aborted) return;
        $("live-state").textContent = "Reconnecting (" + e.message + ")…";
      }
      if (signal.aborted) return;
      await new Promise((ok) => setTimeout(ok, 2000));
    }
  }

  // forecast shows a reservation sale's crowd forecast and the fleet planned for its peak, asked
  // again every forecastEvery while the stats stream: the reservations move it until they close.
  const forecastEvery = 10000;
  let forecastAt = 0, forecastOf = "";

  async function forecast(id) {
    if (id === forecastOf && Date.now() - forecastAt < forecastEvery) return;
    forecastOf = id;
    forecastAt = Date.now();
    const r = await api("GET", "/api/admin/activities/" + encodeURIComponent(id) + "/forecast", { token: token() });
    if (id !== watching) return;
    if (r.status !== 200) {
      $("t-forecast").textContent = "unavailable (" + (errorCode(r) || r.status) + ")";
      $("t-plan").textContent = "–";
      return;
    }
    const f = r.body, m = f.model;
    const num = (v) => Number(v).toLocaleString("en-US");
    $("t-forecast").textContent = num(f.expected_buyers) + " buyers · " + num(f.expected_clicks) + " clicks · peak " +
      num(f.expected_peak_rps) + "/s";
    $("t-basis").textContent = f.basis === "history" ?
      "fitted from " + m.sales + " past sales: " + m.buyers_per_reservation.toFixed(2) + " buyers a reservation, " +
        m.clicks_per_buyer.toFixed(2) + " clicks a buyer, the busiest second " + m.peak_factor.toFixed(2) + " × a wave's mean" :
      "the prior (fewer than 3 past reservation sales)";
    const p = f.plan;
    $("t-plan").textContent = p ? p.api_nodes + " API nodes · " + p.worker_nodes + " workers · " + p.redis_masters +
      " Redis master" + (p.redis_masters === 1 ? "" : "s") + (p.rate_node ? " · SECKILL_RATE_NODE=" + p.rate_node : "") :
      "no plan: " + f.plan_error;
  }

  const FUNNEL = [
    ["rate_limited", "Rate limited", "node"],
    ["blocked", "Blocked", "node"],
    ["challenged", "Challenged", "node"],
    ["sold_out", "Sold out", "node"],
    ["already_bought", "Already bought", "node"],
    ["won", "Won", "stats", (s) => s.grabbed],
    ["queued", "Queued", "stats", (s) => s.pending_queue],
    ["ordered", "Ordered", "stats", (s) => s.orders === undefined ? undefined : s.orders - s.failed],
    ["paid", "Paid", "stats", (s) => s.paid],
    ["expired", "Expired", "stats", (s) => s.expired],
    ["dead_letters", "Dead letters", "stats", (s) => s.dead_letters],
    ["refund_pending", "Refunds to make", "stats", (s) => s.refund_pending],
  ];

  function show(ev) {
    const s = ev.stats || {};
    const num = (v) => (v === undefined || v === null ? "–" : Number(v).toLocaleString("en-US"));
    $("t-stock").textContent = num(s.stock);
    $("t-remaining").textContent = num(s.remaining);
    $("t-queue").textContent = num(s.pending_queue);
    const rs = s.reservation;
    $("reservation-tiles").hidden = !rs;
    if (rs) {
      $("t-reserved").textContent = num(rs.reserved);
      $("t-waves").textContent = rs.waves.map((w) => (w.wave ? "wave " + w.wave : "not assigned") + ": " +
        num(w.won) + " / " + num(w.grabbed) + " / " + num(w.reserved)).join(" · ") || "–";
      if (features.forecasts) forecast(watching);
    }
    $("forecast-tiles").hidden = !rs || !features.forecasts;
    const line = s.line;
    $("line-tiles").hidden = !line;
    if (line) {
      $("t-waiting").textContent = num(line.waiting);
      $("t-joined").textContent = num(line.joined);
      $("t-drain").textContent = line.drain_rate.toFixed(1);
      $("t-wait").textContent = line.wait_s.toFixed(1) + " s";
    }
    const h = $("t-health");
    h.textContent = ev.health;
    h.className = "v level-" + ev.health;
    const secs = ev.node.seconds;
    const last = secs[secs.length - 1] || { requests: 0, p99_us: 0 };
    $("t-rate").textContent = num(last.requests);
    $("t-p99").textContent = last.requests ? (last.p99_us / 1000).toFixed(1) + " ms" : "–";
    if (ev.stats_error) {
      $("live-state").textContent = "Stats unavailable: " + ev.stats_error.code + " (" + ev.stats_error.message + ")";
    } else if (s.shed) {
      const what = { counts: "the database's counts", gate: "the gate's numbers (Redis is away or failing over)" };
      $("live-state").textContent = "Shed while a dependency is away: " + s.shed.map((k) => what[k] || k).join(" and ") + ".";
    } else {
      $("live-state").textContent = "Live: updated every second.";
    }

    const rows = FUNNEL.map(([key, label, from, pick]) => {
      const v = from === "node" ? ev.node.totals[key] : pick(s);
      return { key, label: label + (from === "node" ? " (this node)" : ""), v };
    });
    const top = Math.max(1, ...rows.map((r) => r.v || 0));
    $("funnel").replaceChildren(...rows.map((r) => {
      const fill = el("div", { class: "fill" });
      fill.style.width = ((r.v || 0) / top * 100).toFixed(1) + "%";
      return el("div", { class: "bar", role: "listitem", "data-stage": r.key },
        el("span", { text: r.label }), el("div", { class: "track", "aria-hidden": "true" }, fill),
        el("span", { class: "n", text: num(r.v) }));
    }));

    lineChart.draw($("c-rate"), [
      { label: "requests", color: "#1357b8", values: secs.map((p) => p.requests) },
      { label: "won", color: "#b3261e", values: secs.map((p) => p.won) },
    ], (v) => Math.round(v).toLocaleString("en-US"));
    lineChart.draw($("c-p99"), [
      { label: "p99", color: "#7a4b00", values: secs.map((p) => p.p99_us / 1000) },
      { label: "p50", color: "#17652f", values: secs.map((p) => p.p50_us / 1000) },
    ], (v) => v.toFixed(v < 10 ? 1 : 0));
  }

  // ---- the operator's controls ----

  async function addStock(ev) {
    ev.preventDefault();
    const id = watching;
    const n = Number($("s-add").value);
    if (!id) return;
    if (!Number.isInteger(n) || n < 1) {
      $("operate-result").textContent = "A whole number of units, 1 or more.";
      return;
    }
    const r = await api("POST", "/api/admin/activities/" + encodeURIComponent(id) + "/stock", { token: token(), body: { add: n } });
    $("operate-result").textContent = r.status === 200 ?
      "Added " + n + ": stock " + r.body.stock + ", " + (r.body.remaining === null ? "the gate will have them shortly" : r.body.remaining + " left") + "." :
      r.status === 202 ? "Added " + n + " (stock " + r.body.stock + "), not on sale yet: the gate is away, and has them as soon as it answers." :
      "Refused: " + ((r.body && r.body.error && r.body.error.message) || r.status);
    if (r.status === 200 || r.status === 202) $("s-add").value = "";
  }

  async function endSale() {
    const id = watching;
    if (!id || !window.confirm("End the sale of " + id + " now, on every node? Orders placed keep their payment windows.")) return;
    const r = await api("POST", "/api/admin/activities/" + encodeURIComponent(id) + "/end", { token: token() });
    $("operate-result").textContent = r.status === 200 ? "Ended: grabs are refused from now on." :
      r.status === 202 ? "Ended, but the gate is away: grabs are refused on every node as soon as it answers." :
      "Refused: " + ((r.body && r.body.error && r.body.error.message) || r.status);
    if (r.status === 200 || r.status === 202) await loadList(id);
  }

  // exportOrders downloads the activity's orders as CSV (fetched with the token, which a plain
  // link could not send).
  async function exportOrders() {
    const id = watching;
    if (!id) return;
    const resp = await fetch("/api/admin/activities/" + encodeURIComponent(id) + "/orders.csv", {
      headers: { Authorization: "Bearer " + token() }, cache: "no-store" });
    if (!resp.ok) {
      $("operate-result").textContent = "Export refused: HTTP " + resp.status;
      return;
    }
    const text = await resp.text();
    const rows = text.split("\n").filter((l) => l !== "").length - 1;
    const a = el("a", { href: URL.createObjectURL(new Blob([text], { type: "text/csv" })), download: "orders-" + id + ".csv" });
    document.body.append(a);
    a.click();
    a.remove();
    $("operate-result").textContent = "Exported " + rows + " orders.";
  }

  // ---- the support desk ----

  const when = (t) => (t ? new Date(t).toLocaleString() : "–");

  async function lookup(ev) {
    ev.preventDefault();
    const user = $("u-user").value.trim();
    if (!user) return;
    const r = await api("GET", "/api/admin/orders?user=" + encodeURIComponent(user), { token: token() });
    if (r.status !== 200) {
      $("lookup-result").textContent = "Refused: " + ((r.body && r.body.error && r.body.error.message) || r.status);
      return;
    }
    const n = r.body.orders.length;
    $("lookup-result").textContent = n + (n === 1 ? " order of " : " orders of ") + user + (r.body.next ? " (the newest 50)" : "") + ".";
    $("user-orders").hidden = r.body.orders.length === 0;
    $("user-orders").tBodies[0].replaceChildren(...r.body.orders.map((o) => el("tr", {},
      el("td", { text: o.order_token }), el("td", { text: o.activity_id }), el("td", { text: o.status }),
      el("td", { class: "num", text: money(o.amount_cents) }), el("td", { text: when(o.created_at) }))));
  }

  // act is a table row's button that calls the API and reloads the desk. The result is shown
  // once the desk is reloaded, so what it says and the tables agree.
  function act(label, method, path, body, done) {
    const b = el("button", { type: "button", text: label });
    b.addEventListener("click", async () => {
      b.disabled = true;
      const r = await api(method, path, { token: token(), body });
      const said = r.status === 200 ? done(r.body) :
        "Refused: " + ((r.body && r.body.error && r.body.error.message) || r.status);
      await loadSupport();
      $("support-result").textContent = said;
    });
    return b;
  }

  async function loadSupport() {
    // A feature the node does not serve has no route: it is not asked, and its table says so.
    const get = (feature, path) => features[feature] ? api("GET", path, { token: token() }) : null;
    const [dead, parked, refunds] = await Promise.all([
      get("operator", "/api/admin/dead-letters"),
      get("outbox", "/api/admin/deliveries?state=parked"),
      get("payments", "/api/admin/payments?state=refund_pending"),
    ]);
    const empty = (cols, text) => el("tr", {}, Object.assign(el("td", { class: "muted", text }), { colSpan: cols }));
    const none = (r, absent) => !r ? absent : r.status === 200 ? "None." : "Could not load (" + (errorCode(r) || r.status) + ").";
    const ds = dead && dead.status === 200 ? dead.body.dead_letters : [];
    $("dead").tBodies[0].replaceChildren(...(ds.length ? ds.map((d) => el("tr", {},
      el("td", { text: d.token }), el("td", { text: d.activity_id }), el("td", { text: d.user }), el("td", { text: d.reason }),
      el("td", {}, d.grabbed_at ? act("Replay", "POST", "/api/admin/dead-letters/replay", { token: d.token },
        (b) => "Replayed " + d.token + ": order " + b.order.status + ".") : "kept without its grab"))) :
      [empty(5, none(dead, "No operator's desk on this node."))]));
    const ps = parked && parked.status === 200 ? parked.body.deliveries : [];
    $("parked").tBodies[0].replaceChildren(...(ps.length ? ps.map((p) => el("tr", {},
      el("td", { text: p.event_id }), el("td", { text: p.sink }), el("td", { class: "num", text: String(p.attempts) }),
      el("td", { text: p.last_error || "" }),
      el("td", {}, act("Replay", "POST", "/api/admin/deliveries/replay", { sink: p.sink, event_id: p.event_id },
        () => "Event " + p.event_id + " is due again.")))) :
      [empty(5, none(parked, "No outbox on this node: no receiver of the order events is configured."))]));
    const rs = refunds && refunds.status === 200 ? refunds.body.payments : [];
    // The providers that refund on the node's request (stripe, alipay, wechatpay) are asked by its
    // refunds' relay: "Mark refunded" is for a refund made outside, by hand.
    const byNode = { stripe: true, alipay: true, wechatpay: true };
    $("refunds").tBodies[0].replaceChildren(...(rs.length ? rs.map((p) => el("tr", {},
      el("td", { text: p.payment_id }),
      el("td", { text: p.provider + (byNode[p.provider] ? " (the node refunds it)" : "") }),
      el("td", { text: p.order_token }), el("td", { text: (p.refund_reason || "").replaceAll("_", " ") }),
      el("td", { class: "num", text: money(p.received_cents) }),
      el("td", {}, act("Mark refunded", "POST", "/api/admin/payments/" + encodeURIComponent(p.payment_id) + "/refunded", undefined,
        (b) => "Payment " + p.payment_id + " refunded: " + (b.order ? "order " + b.order.status : "no order of ours") + ".")))) :
      [empty(6, none(refunds, "No payment provider on this node: buyers pay with the pay call, and no money comes to refund."))]));
  }

  async function reconcile() {
    const id = watching;
    if (!id) return;
    $("reconcile").disabled = true;
    $("reconcile-result").textContent = "Reconciling…";
    const r = await api("POST", "/api/admin/activities/" + encodeURIComponent(id) + "/reconcile", { token: token() });
    $("reconcile").disabled = false;
    if (r.status !== 200) {
      $("reconcile-result").textContent = "Failed: " + (errorCode(r) || r.status);
      return;
    }
    const b = r.body;
    $("reconcile-result").textContent = (b.ok ? "In agreement" : "Drift of " + b.drift + (b.repaired ? ", repaired" : "")) +
      ": the gate has " + b.gate_remaining + " left, the database and queue say " + b.expected_remaining + ".";
  }

  // ---- the create form ----

  function kindChanged() {
    const packet = $("c-kind").value === "redpacket";
    $("l-stock").textContent = packet ? "Shares" : "Stock";
    $("l-money").textContent = packet ? "Total" : "Price";
  }

  function localInput(d) {
    const two = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + "T" +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  // cents reads a decimal amount with at most two decimals as integer cents, or NaN.
  function cents(text) {
    const m = /^\s*(\d{1,10})(?:\.(\d{1,2}))?\s*$/.exec(text);
    if (!m) return NaN;
    return Number(m[1]) * 100 + Number((m[2] || "0").padEnd(2, "0"));
  }

  // validate returns the request body, or null after marking the fields that are wrong.
  function validate() {
    const errs = {};
    const name = $("c-name").value.trim();
    const kind = $("c-kind").value;
    const stock = Number($("c-stock").value);
    const amount = cents($("c-money").value);
    const limit = Number($("c-limit").value);
    const start = new Date($("c-start").value);
    const end = new Date($("c-end").value);
    const win = Number($("c-window").value);
    const shards = Number($("c-shards").value);
    const admission = $("c-admission").value;
    const cap = $("c-cap").value.trim() === "" ? 0 : Number($("c-cap").value);
    const rate = Number($("c-rate").value);
    const lined = admission === "queue" || admission === "lottery";
    const reserveText = $("c-reserve").value;
    const reserveFrom = reserveText ? new Date(reserveText) : null;
    const waves = Number($("c-waves").value);
    const interval = $("c-interval").value.trim() === "" ? 0 : Number($("c-interval").value);
    if (!name) errs.name = "A name is required.";
    if (!Number.isInteger(stock) || stock < 1 || stock > 100000000) errs.stock = "A whole number from 1 to 100,000,000.";
    if (Number.isNaN(amount)) errs.money = "An amount such as 9.99.";
    else if (kind === "redpacket" && Number.isInteger(stock) && amount < stock) errs.money = "At least 0.01 per share.";
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) errs.limit = "A whole number from 1 to 1,000.";
    if (Number.isNaN(start.getTime())) errs.start = "A start time is required.";
    if (Number.isNaN(end.getTime())) errs.end = "An end time is required.";
    else if (!errs.start && end <= start) errs.end = "The end must come after the start.";
    if (!Number.isInteger(win) || win < 1 || win > 604800) errs.window = "Seconds, from 1 to 604,800 (a week).";
    if (!Number.isInteger(shards) || shards < 1 || shards > 64) errs.shards = "A whole number from 1 to 64.";
    else if (shards > 1 && kind === "redpacket") errs.shards = "A red packet keeps one list of shares: 1.";
    else if (Number.isInteger(stock) && shards > stock) errs.shards = "No more than the stock.";
    if (admission === "reservation") {
      if (reserveFrom && Number.isNaN(reserveFrom.getTime())) errs.reserve = "A time, or empty for now.";
      else if (reserveFrom && !errs.start && reserveFrom >= start) errs.reserve = "Before the start.";
      if (!Number.isInteger(waves) || waves < 1 || waves > 100) errs.waves = "A whole number from 1 to 100.";
      else if (waves > 1 && (!Number.isInteger(interval) || interval < 1 || interval > 604800)) errs.interval = "Seconds, from 1 to 604,800, with several waves.";
      else if (waves === 1 && interval !== 0) errs.interval = "Empty with one wave.";
      else if (!errs.start && !errs.end && start.getTime() + (waves - 1) * interval * 1000 >= end.getTime()) errs.interval = "The last wave must open before the end.";
    }
    if (lined) {
      if (!Number.isInteger(cap) || cap < 0 || cap > 100000000) errs.cap = "Empty (10 × stock) or a whole number up to 100,000,000.";
      if (!Number.isInteger(rate) || rate < 1 || rate > 1000000) errs.rate = "A whole number from 1 to 1,000,000.";
    }
    for (const f of ["name", "stock", "money", "limit", "start", "end", "window", "shards", "admission", "cap", "rate",
      "reserve", "waves", "interval", "order"]) {
      $("e-" + f).textContent = errs[f] || "";
      const input = $("c-" + f);
      if (errs[f]) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    }
    if (Object.keys(errs).length) {
      $("c-" + Object.keys(errs)[0]).focus();
      return null;
    }
    const body = { name, kind, per_user_limit: limit, start_at: start.toISOString(), end_at: end.toISOString(),
      pay_window_s: win, require_challenge: $("c-challenge").checked };
    if (kind === "redpacket") Object.assign(body, { count: stock, total_cents: amount });
    else Object.assign(body, { stock, price_cents: amount });
    if (shards > 1) body.stock_shards = shards;
    if (lined) {
      body.admission = admission;
      body.admit_rate = rate;
      if (cap > 0) body.queue_cap = cap;
    } else if (admission === "reservation") {
      Object.assign(body, { admission, waves, wave_order: $("c-order").value });
      if (waves > 1) body.wave_interval_s = interval;
      if (reserveFrom) body.reserve_from = reserveFrom.toISOString();
    }
    return body;
  }

  async function create(ev) {
    ev.preventDefault();
    const body = validate();
    if (!body) {
      $("create-result").textContent = "Please fix the marked fields.";
      return;
    }
    const r = await api("POST", "/api/admin/activities", { token: token(), body });
    if (r.status !== 201) {
      $("create-result").textContent = "Refused: " + ((r.body && r.body.error && r.body.error.message) || r.status);
      return;
    }
    $("create-result").textContent = "Created " + r.body.id + " (" + (body.kind === "redpacket" ?
      body.count + " shares of " + money(body.total_cents) : body.stock + " at " + money(body.price_cents)) + ").";
    await loadList(r.body.id);
  }

  function main() {
    $("auth").addEventListener("submit", open);
    $("logout").addEventListener("click", forget);
    $("pick").addEventListener("change", () => watch($("pick").value));
    $("refresh-list").addEventListener("click", () => loadList());
    $("reconcile").addEventListener("click", reconcile);
    $("stock").addEventListener("submit", addStock);
    $("end").addEventListener("click", endSale);
    $("export").addEventListener("click", exportOrders);
    $("lookup").addEventListener("submit", lookup);
    $("refresh-support").addEventListener("click", loadSupport);
    $("create").addEventListener("submit", create);
    $("c-kind").addEventListener("change", kindChanged);
    const now = new Date();
    now.setMilliseconds(0);
    $("c-start").value = localInput(new Date(now.getTime() + 60000));
    $("c-end").value = localInput(new Date(now.getTime() + 3600000));
    if (token()) open();
  }
  main();
})();
