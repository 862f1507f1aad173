// The product page: an item's flash sale or a red-packet drop. The countdown runs on the server's
// clock; the grab button opens at the start, rests for 3 s after each click, walks through the
// challenge when the sale asks for one, and after a win follows the order until it is paid. A
// sale with a waiting line (queue or lottery admission) takes tickets before the start too: the
// page then shows the ticket's place and wait, or the draw, until the line answers. A reservation
// sale takes reservations before the start ("Reserve"), then shows the buyer's number and, once
// the waves are assigned at the start, counts down to the buyer's wave: the button grabs when it
// opens.
"use strict";

(() => {
  const { api, errorCode, clock, session, money, span, $, el, randomKey } = seckill;
  const DEBOUNCE_MS = 3000;
  const POLL_MS = 500;
  const BOARD_MS = 2000;
  const TICKET_MS = 2000;

  const id = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  let act = null;         // the activity, as GET /api/activities/{id} said
  let final = "";         // a state no click can change: sold_out, bought, ended, blocked
  let busy = false;       // a grab is in flight
  let restUntil = 0;      // local ms: the button rests (debounce, or Retry-After) until then
  let key = "";           // the Idempotency-Key of the grab being tried, kept across BUSY retries
  let pass = null;        // the hidden grab path a solved challenge gave, until it is used
  let challengeId = "";
  let clickedAt = 0;      // performance.now() of the click a grab is for: its signals' moment
  let order = null;       // the order being followed
  let polling = false;
  let ticket = null;      // the line's ticket being followed (queue or lottery admission)
  let providers = [];     // the payment providers the buyers may pay at, the default first
  let reservation = null; // the buyer's reservation of a reservation sale, as the server has it
  let reserving = false;  // a reservation is in flight
  let watching = false;

  const isPacket = () => act && act.kind === "redpacket";
  const lined = () => act && (act.admission === "queue" || act.admission === "lottery");
  const isLottery = () => act && act.admission === "lottery";
  const byReservation = () => act && act.admission === "reservation";
  const orderKey = () => "seckill.order." + id + "." + ((session.valid() || {}).user || "");
  const ticketKey = () => "seckill.ticket." + id + "." + ((session.valid() || {}).user || "");

  function say(text, tone = "") {
    const p = $("status");
    p.textContent = text;
    p.className = "status" + (tone ? " " + tone : "");
  }

  // phase is where the sale is on the server's clock.
  function phase() {
    const now = clock.now();
    if (now < Date.parse(act.start_at)) return "upcoming";
    if (now >= Date.parse(act.end_at)) return "ended";
    return "open";
  }

  function renderFacts() {
    document.title = act.name + " — seckill";
    $("name").textContent = act.name;
    if (isPacket()) {
      $("kind").textContent = "Red packet";
      $("price-label").textContent = "Total";
      $("price").textContent = money(act.total_cents);
      $("stock-label").textContent = "Shares left";
      $("board").hidden = false;
    } else {
      $("kind").textContent = "Flash sale";
      $("price").textContent = money(act.price_cents);
    }
    const left = act.remaining === null || act.remaining === undefined ? null : act.remaining;
    $("stock").textContent = left === null ? (act.status === "sold_out" ? "0" : "–") : left + " / " + act.stock;
    $("limit").textContent = String(act.per_user_limit);
    $("admission-fact").hidden = !lined() && !byReservation();
    $("fairness").hidden = !lined() && !byReservation();
    if (byReservation()) {
      const rs = act.reservation;
      $("admission-label").textContent = "Reservation";
      $("admission").textContent = rs.waves === 1 ? "one wave" : rs.waves + " waves, " + span(rs.wave_interval_s * 1000) + " apart";
      let note = "Reserve before the start: only those who reserved may buy, each from their wave's opening";
      note += rs.wave_order === "random"
        ? ", the waves drawn at random at the start (draw commitment " + rs.draw_commitment.slice(0, 16) + "…"
          + (rs.draw_seed ? "; seed revealed: " + rs.draw_seed.slice(0, 16) + "…" : "") + ")."
        : ", in the order of reservation.";
      $("fairness").textContent = note;
    }
    if (lined()) {
      const l = act.line;
      $("admission-label").textContent = isLottery() ? "Lottery" : "Waiting line";
      $("admission").textContent = isLottery() ? l.joined + " entered" : l.waiting + " waiting";
      let note = isLottery()
        ? "Enter before the start: the stock is drawn at random among the entries."
        : "Join before the start: everyone who joined early is shuffled at the start, then later arrivals queue in order.";
      note += " Draw commitment " + l.draw_commitment.slice(0, 16) + "…";
      if (l.draw_seed) note += "; seed revealed: " + l.draw_seed.slice(0, 16) + "… (entries at " + l.entries_url + ")";
      $("fairness").textContent = note;
    }
  }

  // render runs every tick: the clock and what the button may do now.
  function render() {
    const ph = phase();
    const now = clock.now();
    const waveOpens = reservation && reservation.opens_at ? Date.parse(reservation.opens_at) : 0;
    if (ph === "upcoming") {
      $("clock-label").textContent = "Starts in";
      $("clock").textContent = span(Date.parse(act.start_at) - now);
    } else if (ph === "open" && waveOpens > now) {
      $("clock-label").textContent = "Your wave opens in";
      $("clock").textContent = span(waveOpens - now);
    } else if (ph === "open") {
      $("clock-label").textContent = "Ends in";
      $("clock").textContent = span(Date.parse(act.end_at) - now);
    } else {
      $("clock-label").textContent = "The sale has ended";
      $("clock").textContent = "00:00:00";
      if (!final && !order) final = "ended";
    }
    const me = session.valid();
    $("login").hidden = !!me;

    const b = $("grab");
    let label = isPacket() ? "Grab a red packet" : "Grab";
    let enabled = false;
    if (final === "sold_out") label = "Sold out";
    else if (final === "bought") label = isPacket() ? "You have your share" : "Already bought";
    else if (final === "ended") label = "Ended";
    else if (final === "blocked") label = "Not available to you";
    else if (final === "not_drawn") label = "Not drawn";
    else if (order) label = isPacket() ? "You have your share" : "You won";
    else if (final === "not_reserved") label = "Not reserved";
    else if (ticket) label = isLottery() ? "You are entered" : "You are in line";
    else if (!me) label = byReservation() && ph === "upcoming" ? "Sign in to reserve" : "Sign in to grab";
    else if (byReservation() && ph === "upcoming") {
      const from = Date.parse(act.reservation.reserve_from);
      if (reservation) label = "Reserved, #" + reservation.number;
      else if (reserving) label = "Reserving…";
      else if (now < from) label = "Reservations open in " + span(from - now);
      else { label = "Reserve"; enabled = true; }
    } else if (byReservation() && ph === "open" && !reservation) label = "Not reserved";
    else if (byReservation() && ph === "open" && !waveOpens) label = "Your wave is being assigned…";
    else if (byReservation() && ph === "open" && waveOpens > now) label = "Wave " + reservation.wave + " opens in " + span(waveOpens - now);
    else if (lined() && isLottery() && ph !== "upcoming") label = "Entries closed";
    else if (ph === "upcoming" && !lined()) label = "Not started yet";
    else if (busy) label = "Grabbing…";
    else if (Date.now() < restUntil) label = "Wait " + Math.ceil((restUntil - Date.now()) / 1000) + " s";
    else if (!$("challenge").hidden) label = "Answer the challenge above";
    else {
      enabled = ph === "open" || (lined() && ph === "upcoming");
      if (lined()) label = isLottery() ? "Enter the draw" : "Join the line";
    }
    b.textContent = label;
    b.disabled = !enabled;
  }

  function onSession() {
    final = final === "bought" || final === "not_drawn" ? "" : final;
    final = final === "not_reserved" ? "" : final;
    order = null;
    ticket = null;
    reservation = null;
    $("order").hidden = true;
    $("line").hidden = true;
    $("reservation").hidden = true;
    $("amount").hidden = true;
    say("");
    seckill.renderSession($("session"), onSession);
    render();
    resume();
  }

  // grab is the button's click: a reservation before a reservation sale's start, else a grab.
  async function grab() {
    if (byReservation() && phase() === "upcoming") {
      await reserve();
      return;
    }
    restUntil = Date.now() + DEBOUNCE_MS;
    clickedAt = performance.now();
    if (act.require_challenge && !pass) {
      await startChallenge();
      render();
      return;
    }
    await send();
  }

  // reserve reserves the sale for the signed-in buyer.
  async function reserve() {
    const me = session.valid();
    if (!me || reserving) return;
    reserving = true;
    render();
    const r = await api("POST", "/api/activities/" + encodeURIComponent(id) + "/reservations", { token: me.token });
    reserving = false;
    if (r.status === 200 || r.status === 201) {
      showReservation(r.body);
      say("Reserved: you are number " + r.body.number + ". Your wave is assigned at the start.", "ok");
      // The wave comes with the close, at the start: look then.
      setTimeout(followReservation, Math.max(1000, Date.parse(act.start_at) - clock.now() + 500));
    } else if (errorCode(r) === "RESERVATIONS_CLOSED") {
      say("The reservations closed at the start.", "bad");
    } else if (errorCode(r) === "RESERVATIONS_NOT_OPEN") {
      say("The reservations are not open yet.", "warn");
    } else if (errorCode(r) === "RATE_LIMITED") {
      restUntil = Date.now() + 1000 * Math.max(1, parseInt(r.headers.get("Retry-After") || "1", 10));
      say("Too many tries: wait a moment.", "warn");
    } else {
      say("Could not reserve: " + ((r.body && r.body.error && r.body.error.message) || r.status), "bad");
    }
    render();
  }

  // showReservation shows the buyer's reservation: their number, and their wave once assigned.
  function showReservation(v) {
    reservation = v;
    $("reservation").hidden = false;
    $("reservation-number").textContent = "#" + v.number;
    $("reservation-wave").textContent = v.wave ? String(v.wave) : "Assigned at the start";
    $("reservation-opens").textContent = v.opens_at ? new Date(v.opens_at).toLocaleString() : "–";
  }

  // followReservation reads the buyer's reservation until it has its wave (assigned at the start).
  async function followReservation() {
    const me = session.valid();
    if (!me || !byReservation()) return;
    const r = await api("GET", "/api/activities/" + encodeURIComponent(id) + "/reservations/me", { token: me.token });
    if (r.status === 200) {
      showReservation(r.body);
      if (!r.body.wave) setTimeout(followReservation, phase() === "upcoming" ? 5000 : 1000);
    } else if (r.status === 404) {
      reservation = null;
      $("reservation").hidden = true;
    }
    render();
  }

  async function send() {
    const me = session.valid();
    if (!me) return;
    busy = true;
    render();
    if (!key) key = randomKey();
    const path = pass ? pass.grab_path : "/api/activities/" + encodeURIComponent(id) + "/grab";
    say("Grabbing…");
    // The signals go with the grab for the risk model (signals.js): what the pointer did
    // before the click, and the device's fingerprint.
    const r = await api("POST", path, { token: me.token, headers: { "Idempotency-Key": key },
      body: { signals: seckillSignals.collect(clickedAt) } });
    busy = false;
    await answer(r);
    render();
  }

  // answer shows what a grab came back with.
  async function answer(r) {
    const code = errorCode(r);
    if (r.status === 202 && r.body.queue_token) {
      key = ""; pass = null;
      localStorage.setItem(ticketKey(), r.body.queue_token);
      showTicket(r.body);
      watch(r.body.queue_token);
      return;
    }
    if (r.status === 202) {
      key = ""; pass = null;
      localStorage.setItem(orderKey(), r.body.order_token);
      if (isPacket()) {
        $("amount").textContent = "You got " + money(r.body.amount_cents);
        $("amount").hidden = false;
      }
      say("Queued: creating your order…", "ok");
      follow(r.body.order_token);
      refreshActivity();
      return;
    }
    switch (code) {
    case "SOLD_OUT":
      key = ""; pass = null; final = "sold_out";
      say(isPacket() ? "All the shares are gone." : "Sold out.", "bad");
      refreshActivity();
      return;
    case "ALREADY_BOUGHT":
      key = ""; pass = null; final = "bought";
      say(isPacket() ? "You already have your share." : "You already bought this.", "warn");
      resume();
      return;
    case "QUEUE_FULL": {
      const wait = Math.max(1, parseInt(r.headers.get("Retry-After") || "1", 10));
      restUntil = Math.max(restUntil, Date.now() + wait * 1000);
      say("The line is full right now: try again in a moment.", "warn");
      return;
    }
    case "RATE_LIMITED": {
      const wait = Math.max(1, parseInt(r.headers.get("Retry-After") || "1", 10));
      restUntil = Math.max(restUntil, Date.now() + wait * 1000); // never shorter than the debounce
      say("Too many tries: wait " + wait + " s.", "warn");
      return;
    }
    case "BUSY":
    case "NETWORK":
    case "INTERNAL":
      // The same key goes with the next try: if this one was taken, the retry gets its answer
      // and never a second unit.
      say("The sale is busy right now. Try again; your try is not lost.", "warn");
      return;
    case "CHALLENGE_REQUIRED":
      say("Please solve the challenge first.", "warn");
      await startChallenge();
      return;
    case "CHALLENGE_FAILED":
      pass = null;
      say("That check is used up or expired: here is a new one.", "warn");
      await startChallenge();
      return;
    case "NOT_RESERVED":
      key = ""; final = "not_reserved";
      say("Only those who reserved before the start may buy.", "bad");
      return;
    case "WAVE_NOT_OPEN": {
      const wait = Math.max(1, parseInt(r.headers.get("Retry-After") || "1", 10));
      restUntil = Math.max(restUntil, Date.now() + wait * 1000);
      say(wait <= 1 ? "Your wave is being assigned: a moment." : "Your wave has not opened yet.", "warn");
      if (!reservation || !reservation.wave) followReservation();
      return;
    }
    case "NOT_STARTED":
      say("Not started yet.", "warn");
      await clock.sync();
      return;
    case "ENDED":
      key = ""; final = "ended";
      say(isLottery() ? "The entries are closed." : "The sale has ended.", "bad");
      return;
    case "BLOCKED":
      key = ""; final = "blocked";
      say("You cannot take part in this sale.", "bad");
      return;
    case "UNAUTHORIZED":
      session.clear();
      seckill.renderSession($("session"), onSession);
      say("Your sign-in expired: sign in again.", "warn");
      return;
    default:
      say("Could not grab: " + ((r.body && r.body.error && r.body.error.message) || r.status), "bad");
    }
  }

  async function startChallenge() {
    const me = session.valid();
    if (!me) return;
    const r = await api("POST", "/api/activities/" + encodeURIComponent(id) + "/challenge", { token: me.token });
    if (r.status !== 201) {
      await answer(r);
      return;
    }
    challengeId = r.body.challenge_id;
    $("challenge").dataset.challenge = challengeId; // for support staff (and the tests): which one was shown
    $("challenge-img").src = r.body.image;
    $("answer").value = "";
    $("challenge").hidden = false;
    $("answer").focus();
  }

  async function solve(ev) {
    ev.preventDefault();
    const me = session.valid();
    const n = parseInt($("answer").value, 10);
    if (!me || Number.isNaN(n)) return;
    const r = await api("POST", "/api/activities/" + encodeURIComponent(id) + "/challenge/answer",
      { token: me.token, body: { challenge_id: challengeId, answer: n } });
    $("challenge").hidden = true;
    if (r.status !== 200) {
      if (errorCode(r) === "CHALLENGE_FAILED") {
        say("Wrong answer: try this one.", "warn");
        await startChallenge();
      } else {
        await answer(r);
      }
      render();
      return;
    }
    pass = { grab_path: r.body.grab_path };
    await send();
  }

  // follow polls an order until the worker has created it, then offers to pay.
  async function follow(token) {
    if (polling) return;
    polling = true;
    const me = session.valid();
    while (me && session.valid() && session.valid().token === me.token) {
      const r = await api("GET", "/api/orders/" + encodeURIComponent(token), { token: me.token });
      if (r.status === 200) {
        showOrder(r.body);
        if (r.body.status !== "PENDING") break;
      } else if (r.status === 404 || r.status === 401) {
        localStorage.removeItem(orderKey());
        break;
      }
      await new Promise((ok) => setTimeout(ok, POLL_MS));
    }
    polling = false;
  }

  function showOrder(o) {
    order = o;
    $("order").hidden = false;
    const names = { PENDING: "Queued", CREATED: isPacket() ? "Ready to claim" : "Created: waiting for payment",
      PAID: isPacket() ? "Claimed" : "Paid", CANCELLED: "Cancelled", FAILED: "Failed",
      REFUND_PENDING: "Paid too late: refund on its way", REFUNDED: "Refunded" };
    $("order-status").textContent = names[o.status] || o.status;
    $("order-amount").textContent = money(o.amount_cents);
    $("order-due-label").textContent = isPacket() ? "Claim within" : "Pay within";
    $("pay").textContent = isPacket() ? "Claim" : "Pay";
    $("pay").hidden = o.status !== "CREATED";
    $("provider-choice").hidden = o.status !== "CREATED" || providers.length < 2;
    if (o.status !== "CREATED") $("scan").hidden = true;
    if (o.status === "CREATED") say(isPacket() ? "Your share is ready: claim it." : "Your order is created: pay to keep it.", "ok");
    if (o.status === "PAID") say(isPacket() ? "Claimed. Enjoy!" : "Paid. Thank you!", "ok");
    if (o.status === "CANCELLED") say("This order was cancelled" + (o.reason ? ": " + o.reason : "."), "bad");
    if (o.status === "FAILED") say("The order could not be created" + (o.reason ? ": " + o.reason : "."), "bad");
    if (o.status === "REFUND_PENDING") say("Your payment came after the order was cancelled: it is being refunded.", "bad");
    if (o.status === "REFUNDED") say("Your payment came after the order was cancelled: it was refunded.", "bad");
    renderDue();
    render();
  }

  function renderDue() {
    if (!order) return;
    const due = order.status === "CREATED" && order.expires_at ? Date.parse(order.expires_at) - clock.now() : null;
    $("order-due").textContent = due === null ? "–" : span(due);
  }

  async function pay() {
    const me = session.valid();
    if (!me || !order) return;
    $("pay").disabled = true;
    const opts = { token: me.token };
    if (providers.length > 1) opts.body = { provider: $("provider").value };
    const r = await api("POST", "/api/orders/" + encodeURIComponent(order.order_token) + "/pay", opts);
    $("pay").disabled = false;
    const p = r.status === 202 && r.body.payment;
    if (p && p.pay_qr) {
      // Scanned with the provider's app (WeChat Pay on a desktop): its notice pays the order,
      // which this page follows.
      $("scan-code").src = p.pay_qr;
      $("scan").hidden = false;
      say("Scan the code to pay.", "ok");
      watchPayment(order.order_token);
    } else if (p && p.pay_url) {
      // A payment provider takes it from here; its notice pays the order.
      say("Taking you to the payment page…", "ok");
      location.assign(p.pay_url);
    } else if (r.status === 200) showOrder(r.body);
    else say("Payment failed: " + ((r.body && r.body.error && r.body.error.message) || r.status), "bad");
  }

  // watchPayment polls an order whose payment the buyer makes elsewhere (a code scanned) until
  // it is no longer awaiting payment.
  async function watchPayment(token) {
    const me = session.valid();
    while (me && session.valid() && session.valid().token === me.token && order && order.order_token === token) {
      await new Promise((ok) => setTimeout(ok, POLL_MS));
      const r = await api("GET", "/api/orders/" + encodeURIComponent(token), { token: me.token });
      if (r.status !== 200) continue;
      if (r.body.status !== "CREATED") { showOrder(r.body); break; }
    }
  }

  // loadProviders learns the payment providers the buyers may pay at (none: the pay call pays)
  // and offers them, by name, the default first.
  async function loadProviders() {
    const r = await api("GET", "/api/payments/providers");
    providers = r.status === 200 && r.body && Array.isArray(r.body.providers) ? r.body.providers : [];
    const names = { signed: "Card", stripe: "Card (Stripe)", alipay: "Alipay 支付宝", wechatpay: "WeChat Pay 微信支付" };
    $("provider").replaceChildren(...providers.map((p) => el("option", { value: p, text: names[p] || p })));
    if (order) showOrder(order);
  }

  // showTicket shows where a ticket in the line stands.
  function showTicket(t) {
    ticket = t;
    if (act.line && typeof t.waiting === "number") { // the poll is fresher than the last activity read
      act.line.waiting = t.waiting;
      renderFacts();
    }
    $("line").hidden = false;
    $("line-title").textContent = isLottery() ? "Your entry" : "Your place in line";
    const names = { JOINED: "In line", ALREADY_QUEUED: "In line", WAITING: "In line", WON: isLottery() ? "Drawn: you won" : "Your turn: you won",
      SOLD_OUT: "Sold out before your turn", NOT_DRAWN: "Not drawn", ALREADY_BOUGHT: "Already bought", ENDED: "The sale ended first" };
    $("line-status").textContent = names[t.status] || t.status;
    const waiting = t.status === "JOINED" || t.status === "ALREADY_QUEUED" || t.status === "WAITING";
    let position = "–";
    if (waiting && t.position) position = "#" + t.position + " of " + t.waiting;
    else if (waiting && t.early) position = isLottery() ? "Drawn at the start" : "Shuffled at the start";
    $("line-position").textContent = position;
    $("line-wait").textContent = waiting && t.estimated_wait_s !== null && t.estimated_wait_s !== undefined
      ? span(t.estimated_wait_s * 1000) : "–";
    switch (t.status) {
    case "JOINED":
    case "ALREADY_QUEUED":
    case "WAITING":
      say(isLottery() ? "You are entered. The draw is at the start." : "You are in line: keep this page open.", "ok");
      break;
    case "WON":
      localStorage.setItem(orderKey(), t.order_token);
      say("Your turn came: creating your order…", "ok");
      follow(t.order_token);
      break;
    case "SOLD_OUT":
      final = "sold_out";
      say("Sold out before your turn came.", "bad");
      break;
    case "NOT_DRAWN":
      final = "not_drawn";
      say("You were not drawn this time.", "bad");
      break;
    case "ALREADY_BOUGHT":
      final = "bought";
      say("You already bought this.", "warn");
      break;
    case "ENDED":
      final = "ended";
      say("The sale ended before your turn.", "bad");
      break;
    }
    render();
  }

  // watch polls a ticket until the line has answered it, slowing down when told to.
  async function watch(token) {
    if (watching) return;
    watching = true;
    const me = session.valid();
    while (me && session.valid() && session.valid().token === me.token) {
      await new Promise((ok) => setTimeout(ok, TICKET_MS));
      const r = await api("GET", "/api/queue/" + encodeURIComponent(token), { token: me.token });
      if (r.status === 200) {
        showTicket(r.body);
        if (r.body.status !== "WAITING") break;
      } else if (r.status === 404 || r.status === 401) {
        localStorage.removeItem(ticketKey());
        break;
      } else if (r.status === 429) {
        const wait = Math.max(1, parseInt(r.headers.get("Retry-After") || "1", 10));
        await new Promise((ok) => setTimeout(ok, wait * 1000));
      }
    }
    watching = false;
  }

  // resume shows the order (or the line's ticket) this user already has here, after a reload.
  async function resume() {
    if (!session.valid()) return;
    followReservation();
    const token = localStorage.getItem(orderKey());
    if (token) {
      follow(token);
      return;
    }
    const t = localStorage.getItem(ticketKey());
    if (!t) return;
    const me = session.valid();
    const r = await api("GET", "/api/queue/" + encodeURIComponent(t), { token: me.token });
    if (r.status === 200) {
      showTicket(r.body);
      if (r.body.status === "WAITING") watch(t);
    } else if (r.status === 404) {
      localStorage.removeItem(ticketKey());
    }
  }

  async function refreshActivity() {
    const r = await api("GET", "/api/activities/" + encodeURIComponent(id));
    if (r.status === 200) {
      act = r.body;
      if (act.status === "sold_out" && !order && final === "") final = "sold_out";
      renderFacts();
    }
    return r;
  }

  async function refreshBoard() {
    const r = await api("GET", "/api/activities/" + encodeURIComponent(id) + "/leaderboard?limit=10");
    if (r.status === 200) {
      $("leaders").replaceChildren(...r.body.entries.map((e) => el("tr", {},
        el("td", { class: "num", text: String(e.rank) }), el("td", { text: e.user }),
        el("td", { class: "num", text: money(e.amount_cents) }))));
    }
    const me = session.valid();
    if (!me) { $("my-rank").textContent = ""; return; }
    const mine = await api("GET", "/api/activities/" + encodeURIComponent(id) + "/rank", { token: me.token });
    if (mine.status === 200 && mine.body.entries.length) {
      const e = mine.body.entries[0];
      $("my-rank").textContent = "Your rank: " + (mine.body.exact ? "" : "about ") + e.rank + " with " + money(e.amount_cents);
    } else {
      $("my-rank").textContent = "";
    }
  }

  async function main() {
    $("grab").addEventListener("click", grab);
    $("pay").addEventListener("click", pay);
    loadProviders();
    $("challenge").addEventListener("submit", solve);
    $("login").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const msg = await seckill.login($("user").value.trim());
      $("login-error").textContent = msg;
      if (!msg) onSession();
    });
    const [, r] = await Promise.all([clock.sync(), refreshActivity()]);
    if (r.status !== 200) {
      $("loading").textContent = r.status === 404 ? "There is no such sale." : "Could not load the sale (" + (errorCode(r) || r.status) + ").";
      return;
    }
    $("loading").hidden = true;
    $("product").hidden = false;
    seckill.renderSession($("session"), onSession);
    render();
    resume();
    setInterval(() => { render(); renderDue(); }, 200);
    setInterval(refreshActivity, 5000);
    setInterval(() => clock.sync(1), 60000);
    if (isPacket()) {
      refreshBoard();
      setInterval(refreshBoard, BOARD_MS);
    }
  }
  main();
})();
