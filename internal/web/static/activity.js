// The product page: an item's flash sale or a red-packet drop. The countdown runs on the server's
// clock; the grab button opens at the start, rests for 3 s after each click, walks through the
// challenge when the sale asks for one, and after a win follows the order until it is paid.
"use strict";

(() => {
  const { api, errorCode, clock, session, money, span, $, el, randomKey } = seckill;
  const DEBOUNCE_MS = 3000;
  const POLL_MS = 500;
  const BOARD_MS = 2000;

  const id = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  let act = null;         // the activity, as GET /api/activities/{id} said
  let final = "";         // a state no click can change: sold_out, bought, ended, blocked
  let busy = false;       // a grab is in flight
  let restUntil = 0;      // local ms: the button rests (debounce, or Retry-After) until then
  let key = "";           // the Idempotency-Key of the grab being tried, kept across BUSY retries
  let pass = null;        // the hidden grab path a solved challenge gave, until it is used
  let challengeId = "";
  let order = null;       // the order being followed
  let polling = false;

  const isPacket = () => act && act.kind === "redpacket";
  const orderKey = () => "seckill.order." + id + "." + ((session.valid() || {}).user || "");

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
  }

  // render runs every tick: the clock and what the button may do now.
  function render() {
    const ph = phase();
    const now = clock.now();
    if (ph === "upcoming") {
      $("clock-label").textContent = "Starts in";
      $("clock").textContent = span(Date.parse(act.start_at) - now);
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
    else if (order) label = isPacket() ? "You have your share" : "You won";
    else if (!me) label = "Sign in to grab";
    else if (ph === "upcoming") label = "Not started yet";
    else if (busy) label = "Grabbing…";
    else if (Date.now() < restUntil) label = "Wait " + Math.ceil((restUntil - Date.now()) / 1000) + " s";
    else if (!$("challenge").hidden) label = "Answer the challenge above";
    else enabled = ph === "open";
    b.textContent = label;
    b.disabled = !enabled;
  }

  function onSession() {
    final = final === "bought" ? "" : final;
    order = null;
    $("order").hidden = true;
    $("amount").hidden = true;
    say("");
    seckill.renderSession($("session"), onSession);
    render();
    resume();
  }

  // grab is the button's click.
  async function grab() {
    restUntil = Date.now() + DEBOUNCE_MS;
    if (act.require_challenge && !pass) {
      await startChallenge();
      render();
      return;
    }
    await send();
  }

  async function send() {
    const me = session.valid();
    if (!me) return;
    busy = true;
    render();
    if (!key) key = randomKey();
    const path = pass ? pass.grab_path : "/api/activities/" + encodeURIComponent(id) + "/grab";
    say("Grabbing…");
    const r = await api("POST", path, { token: me.token, headers: { "Idempotency-Key": key } });
    busy = false;
    await answer(r);
    render();
  }

  // answer shows what a grab came back with.
  async function answer(r) {
    const code = errorCode(r);
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
    case "NOT_STARTED":
      say("Not started yet.", "warn");
      await clock.sync();
      return;
    case "ENDED":
      key = ""; final = "ended";
      say("The sale has ended.", "bad");
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
      PAID: isPacket() ? "Claimed" : "Paid", CANCELLED: "Cancelled", FAILED: "Failed" };
    $("order-status").textContent = names[o.status] || o.status;
    $("order-amount").textContent = money(o.amount_cents);
    $("order-due-label").textContent = isPacket() ? "Claim within" : "Pay within";
    $("pay").textContent = isPacket() ? "Claim" : "Pay";
    $("pay").hidden = o.status !== "CREATED";
    if (o.status === "CREATED") say(isPacket() ? "Your share is ready: claim it." : "Your order is created: pay to keep it.", "ok");
    if (o.status === "PAID") say(isPacket() ? "Claimed. Enjoy!" : "Paid. Thank you!", "ok");
    if (o.status === "CANCELLED") say("This order was cancelled" + (o.reason ? ": " + o.reason : "."), "bad");
    if (o.status === "FAILED") say("The order could not be created" + (o.reason ? ": " + o.reason : "."), "bad");
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
    const r = await api("POST", "/api/orders/" + encodeURIComponent(order.order_token) + "/pay", { token: me.token });
    $("pay").disabled = false;
    if (r.status === 200) showOrder(r.body);
    else say("Payment failed: " + ((r.body && r.body.error && r.body.error.message) || r.status), "bad");
  }

  // resume shows the order this user already has here (after a reload).
  function resume() {
    const token = localStorage.getItem(orderKey());
    if (token && session.valid()) follow(token);
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
