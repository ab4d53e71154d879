// clankie's phone page (SPEC H5, H6, D17): live updates by long-poll (the reply Clankie is
// writing too, in its own element, as text), answers without a reload.
// Our own code, no library. It never resubmits by itself: a request is sent on a tap only.
"use strict";
//
// Every POST is sent with referrerPolicy "strict-origin": under the page's own
// "Referrer-Policy: no-referrer" a browser sends "Origin: null", and clankie accepts a
// state change only with its own Origin (SPEC H4). The Referer then holds the origin only.
(function () {
  const KEY = "clankie-key";
  const pairForm = document.getElementById("pair-form");
  if (pairForm) {
    pairForm.addEventListener("submit", async function (event) {
      event.preventDefault();
      const button = pairForm.querySelector("button");
      button.disabled = true;
      const message = document.getElementById("pair-status");
      message.textContent = "Pairing…";
      try {
        const response = await fetch("/pair", {
          method: "POST",
          credentials: "same-origin",
          referrerPolicy: "strict-origin",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(new FormData(pairForm)).toString(),
        });
        const reply = await response.json();
        if (response.ok && reply.key) {
          // The page's half of this browser's credential (SPEC H3): kept in this origin's
          // storage, which no other port or host can read, and sent with every request.
          localStorage.setItem(KEY, reply.key);
          location.replace("/");  // paired: the code leaves the address bar
          return;
        }
        message.textContent = reply.message || "Not paired.";
      } catch (e) {
        message.textContent = "Not paired: the connection to clankie failed. Try again.";
        button.disabled = false;
      }
    });
    return;
  }
  let key = "";
  try {
    key = localStorage.getItem(KEY) || "";
  } catch (e) {
    key = "";  // no storage: the service says the page's half is missing
  }
  const asked = new URLSearchParams(location.search);  // answer_url's conversation (H7)
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  let alive = true;
  let after = 0;
  let watching = null;
  let busy = false;
  let down = false;  // the last request to clankie failed: it is not reachable (H6)
  // What the owner typed in the answer box, and for which question: kept across redraws
  // and conflicts, and shown to copy when its question ended (H6).
  let typed = "";
  let typedFor = "";
  // An answer tapped before this browser held control, waiting for the one confirmation
  // that takes control and sends it (H5).
  let offered = null;
  // The question the status line's last outcome was about: a view of another question
  // clears it, so no stale "Not sent" stays under a question it was not about.
  let statusFor = null;
  // The server's clock less this browser's (its Date header, as of the last view), so a
  // phone whose clock is off still says the lease ended when it did.
  let skew = 0;
  // The reply Clankie is writing (SPEC D17): what the page last received of it, sent back
  // as it came (a reply ID and a length: the page never counts characters itself).
  let liveAt = { reply_id: null, offset: 0 };
  let live = null;  // the reply shown: { reply_id, state, idle_ms, elapsed_ms, got, calling }
  // A reply gone from memory, shown until a view asked for after that says what became of
  // it: { reply_id, after: the views asked for by then }.
  let ending = null;
  let views = 0;
  let seen = null;  // Clankie's stored messages already on the page (each announced once)
  let seenIn = null;  // ... in this conversation
  let lastView = 0;

  function state() {
    return document.getElementById("state") || { dataset: {} };
  }

  function say(text, outcome) {
    status.textContent = text;
    status.dataset.outcome = outcome || "";
  }

  // H6: the service's own state. Unreachable: said in the status line, the view dimmed and
  // its buttons off until clankie answers again; back: the line cleared by itself.
  function unreachable() {
    if (!alive) return;
    down = true;
    document.body.classList.add("down");
    for (const b of view.querySelectorAll("button")) b.disabled = true;
    const unsent = status.dataset.outcome === "error"
      ? "Not sent: the connection to clankie failed; nothing was resent. " : "";
    if (status.dataset.outcome !== "down") say(unsent + "clankie is not reachable; retrying…", "down");
  }

  function reachable() {
    if (!down) return;
    down = false;
    document.body.classList.remove("down");
    for (const b of view.querySelectorAll("button")) b.disabled = false;
    if (status.dataset.outcome === "down" || status.dataset.outcome === "error") say("", "");
  }

  function revoked(message) {
    alive = false;
    view.innerHTML = "";
    const p = document.createElement("p");
    p.id = "revoked";
    p.className = "message";
    p.setAttribute("role", "alert");  // said once, here: the status line stays empty
    p.textContent = message;
    view.appendChild(p);
    say("", "revoked");
  }

  async function refresh() {
    const s = state().dataset;
    const params = new URLSearchParams();
    const chosen = s.chosen || asked.get("c");
    if (chosen) params.set("c", chosen);
    // answer_url names its question (H7): an old notification's is said ended, not passed
    // for the question asked after it.
    if (!s.request && !s.noted && asked.get("r")) params.set("r", asked.get("r"));
    if (s.request) params.set("r", s.request);
    if (s.noted) params.set("n", s.noted);
    let response;
    let number = 0;  // this view's, counted from the page's first (settle)
    try {
      await paced(false);
      lastView = performance.now();
      number = ++views;
      response = await fetch("/view?" + params.toString(),
                             { credentials: "same-origin", headers: { "X-Clankie-Key": key } });
    } catch (e) {
      unreachable();
      throw e;
    }
    if (response.status === 401) {
      revoked((await response.json()).message);
      return;
    }
    if (response.status >= 500) {  // a proxy in front says clankie is down
      unreachable();
      return;
    }
    if (!response.ok) return;
    const served = Date.parse(response.headers.get("date") || "");
    if (!isNaN(served)) skew = served - Date.now();
    const html = await response.text();
    const wasDown = down;
    reachable();
    // Redrawn also while the owner types (H6): what was typed is kept (redraw).
    if (html !== view.dataset.shown || wasDown) {
      redraw(html);
      if (!view.querySelector("#lease.held")) leaseEnded();
    }
    settle(number);
    const now = state().dataset.request || "";
    // A refusal or failure said about a question no longer shown is stale: cleared. What
    // was accepted stays said (the ended note under it says the same, and Clankie's next
    // question may come within a second: the owner still reads what was sent; it names
    // the answer in quotes).
    if (statusFor !== null && now !== statusFor &&
        !["down", "accepted", "duplicate", "control", ""].includes(status.dataset.outcome)) {
      say("", "");
      statusFor = null;
    }
    tick();
  }

  // A redraw of the same question keeps what the owner was doing (H6, keyboard and screen
  // reader use): the control that had the focus keeps it, and an opened cancel step stays
  // open. The first live update always redraws the view the page was served with.
  function redraw(html) {
    const request = state().dataset.request;
    const focused = view.contains(document.activeElement) ? document.activeElement.id : "";
    const confirm = document.getElementById("cancel-confirm");
    const confirming = confirm && !confirm.hidden;
    const box = document.getElementById("answer-text");
    const selection = box && focused === "answer-text" ? [box.selectionStart, box.selectionEnd]
                                                       : null;
    const held = holdLive();
    view.innerHTML = html;
    view.dataset.shown = html;
    placeLive(held);
    keepTyped(selection);
    reoffer();
    if (!request || state().dataset.request !== request) return;
    const again = document.getElementById("cancel-confirm");
    if (confirming && again) {
      again.hidden = false;
      document.getElementById("cancel-question").setAttribute("aria-expanded", "true");
    }
    const control = focused && document.getElementById(focused);
    if (control && !control.hidden) control.focus();
  }

  // What the owner typed survives a redraw (H6): back in the box while its question is the
  // one shown (a conflict shows it afresh), else kept beside the view to copy, never sent.
  function keepTyped(selection) {
    const old = document.getElementById("kept");
    if (old) old.remove();
    if (!typed) return;
    const form = document.getElementById("answer");
    const box = document.getElementById("answer-text");
    if (box && form && form.dataset.request === typedFor) {
      box.value = typed;
      if (selection) {
        box.focus();
        box.setSelectionRange(selection[0], selection[1]);
      }
      return;
    }
    const kept = document.createElement("section");
    kept.id = "kept";
    kept.className = "kept";
    kept.setAttribute("aria-label", "Your text, not sent");
    const p = document.createElement("p");
    p.textContent = "Your text was not sent: its question is no longer the one shown. It " +
                    "is kept here for you to copy.";
    const copy = document.createElement("textarea");
    copy.id = "kept-text";
    copy.readOnly = true;
    copy.rows = 3;
    copy.value = typed;
    copy.setAttribute("aria-label", "Your text, not sent");
    const discard = document.createElement("button");
    discard.type = "button";
    discard.className = "big cancel";
    discard.id = "kept-discard";
    discard.textContent = "Discard this text";
    kept.append(p, copy, discard);
    const where = document.getElementById("ended") || document.querySelector("#state > section.device");
    if (where) where.after(kept); else view.prepend(kept);
    if (selection) copy.focus();
  }

  // A control device that does not hold the lease (H5): its options are not yet active.
  function needsControl() {
    return !!document.getElementById("take-control") && !document.querySelector("#lease.held");
  }

  function offer(answer, label) {
    offered = { answer: answer, label: label };
    reoffer(true);
  }

  // The one deliberate confirmation: "Take control and send ANSWER?", with how long the
  // lease lasts and until when (this browser's clock, with its zone).
  function reoffer(focus) {
    const box = document.getElementById("control-confirm");
    const form = document.getElementById("answer");
    if (!offered) return;
    if (!box || !form || form.dataset.request !== offered.answer.request_id || !needsControl()) {
      offered = null;
      return;
    }
    const text = document.getElementById("control-confirm-text");
    const theirs = document.createElement("span");
    theirs.className = offered.label.quoted ? "theirs" : "";
    theirs.textContent = offered.label.text;
    text.replaceChildren("Take control and send ", theirs, "?");
    const ttl = Number(box.dataset.ttl) || 0;
    document.getElementById("control-confirm-lease").textContent =
      "Taking control lets this browser answer for " + span(ttl) + ", until " +
      zoned(new Date(Date.now() + skew + ttl * 1000)) + ".";
    box.hidden = false;
    if (focus) document.getElementById("control-confirm-send").focus();
  }

  function zoned(date) {
    const parts = {};
    const format = new Intl.DateTimeFormat("en-GB", {
      year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
      hourCycle: "h23", timeZoneName: "short" });
    for (const part of format.formatToParts(date)) parts[part.type] = part.value;
    return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" +
           parts.minute + " " + (parts.timeZoneName || "");
  }

  async function post(action, body) {
    const response = await fetch("/api/" + action, {
      method: "POST",
      credentials: "same-origin",
      referrerPolicy: "strict-origin",
      headers: { "Content-Type": "application/json", "X-Clankie-Key": key },
      body: JSON.stringify(body || {}),
    });
    if (response.status >= 500) throw new Error("unreachable");
    return response.json();
  }

  // `withControl`: take control first, then send (the one confirmation, H5); each is
  // bound as ever, and the answer is sent only once control is held.
  async function send(action, body, withControl) {
    if (busy) return;
    busy = true;
    offered = null;
    const confirm = document.getElementById("control-confirm");
    if (confirm) confirm.hidden = true;
    for (const b of view.querySelectorAll("button")) b.disabled = true;
    say("Sending…", "sending");
    statusFor = state().dataset.request || "";
    try {
      let reply = withControl ? await post("take-control", {}) : null;
      if (!reply || reply.outcome === "control") reply = await post(action, body);
      if (reply.outcome === "revoked") {
        revoked(reply.message);
        return;
      }
      if (action === "answer" && body.text !== undefined &&
          (reply.outcome === "accepted" || reply.outcome === "duplicate")) {
        typed = "";  // sent: nothing to keep
      }
      say(reply.message, reply.outcome);
    } catch (e) {
      say("Not sent: the connection to clankie failed. Nothing was resent; try again.", "error");
    } finally {
      // The reply is in: the buttons work again at once, and focus stays on the outcome
      // (a live region outside the view, so redrawing the view cannot take it away).
      for (const b of view.querySelectorAll("button")) b.disabled = false;
      busy = false;
      if (alive) {
        status.focus();
        await refresh();
        statusFor = state().dataset.request || "";
      }
    }
  }

  function binding(form) {
    return {
      conversation_id: form.dataset.conversation,
      request_id: form.dataset.request,
      incarnation: form.dataset.incarnation,
      revision: Number(form.dataset.revision),
    };
  }

  // A held key repeats: a held Enter opened "Take control and send ...?" and, with the
  // focus on its button, sent at once (red team). Only a fresh press acts.
  document.addEventListener("keydown", function (event) {
    if (event.repeat && (event.key === "Enter" || event.key === " ")) event.preventDefault();
  }, true);

  view.addEventListener("click", function (event) {
    const button = event.target.closest("button");
    if (!button || button.disabled) return;
    const form = document.getElementById("answer");
    if (button.id === "take-control") {
      send("take-control", {});
    } else if (button.dataset.option && form) {
      const answer = Object.assign(binding(form), { option_id: button.dataset.option });
      const label = button.querySelector(".theirs");
      if (needsControl()) offer(answer, { text: label ? label.textContent : "", quoted: true });
      else send("answer", answer);
    } else if (button.id === "control-confirm-send" && offered) {
      send("answer", offered.answer, true);
    } else if (button.id === "control-confirm-no") {
      offered = null;
      document.getElementById("control-confirm").hidden = true;
    } else if (button.id === "kept-discard") {
      typed = "";
      keepTyped(null);
    } else if (button.id === "cancel-question") {
      // Cancelling takes a second, deliberate tap on a button that appears only now.
      const confirm = document.getElementById("cancel-confirm");
      confirm.hidden = !confirm.hidden;
      button.setAttribute("aria-expanded", String(!confirm.hidden));
      if (!confirm.hidden) confirm.focus();
    } else if (button.id === "cancel-confirm" && form) {
      send("cancel", binding(form));
    }
  });

  view.addEventListener("submit", function (event) {
    event.preventDefault();
    const form = document.getElementById("answer");
    const text = document.getElementById("answer-text");
    if (!form || !text) return;
    if (!text.value.trim()) {
      say("Not sent: the answer is empty.", "invalid");
      return;
    }
    const answer = Object.assign(binding(form), { text: text.value });
    if (needsControl()) offer(answer, { text: "your text answer", quoted: false });
    else send("answer", answer);
  });

  view.addEventListener("input", function (event) {
    if (event.target.id !== "answer-text") return;
    const form = document.getElementById("answer");
    typed = event.target.value;
    typedFor = form ? form.dataset.request : "";
  });

  // The page's own clock (H6): "(in 5 min)" beside each time, and a lease line that says
  // the lease ended the moment it ends, even while the view is not redrawn (typing).

  function span(seconds) {
    if (seconds < 60) return Math.ceil(seconds) + " s";
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + " min";
    const hours = Math.floor(minutes / 60);
    if (hours < 48) return hours + " h" + (minutes % 60 ? " " + (minutes % 60) + " min" : "");
    return Math.floor(hours / 24) + " d";
  }

  function leaseEnded() {
    if (status.dataset.outcome === "control") say("", "");  // "You took control" no more
  }

  function tick() {
    sayLiveState();
    const now = Date.now() + skew;
    for (const t of view.querySelectorAll("[data-until]")) {
      const left = (Date.parse(t.dataset.until) - now) / 1000;
      t.textContent = left >= 1 ? " (in " + span(left) + ")" : " (now)";
    }
    const lease = document.getElementById("lease");
    if (lease && lease.dataset.expires && Date.parse(lease.dataset.expires) <= now) {
      delete lease.dataset.expires;
      lease.classList.remove("held");
      lease.textContent = "You do not hold Take Control: answers from this browser are " +
                          "refused until you take it.";
      const take = document.getElementById("take-control");
      if (take) take.hidden = false;
      for (const b of view.querySelectorAll("#answer .big")) b.classList.add("inactive");
      leaseEnded();
    }
  }

  function pause(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  // D17: the page asks for updates at most 4 times a second: never more than 4 requests
  // (its views and its long-polls) begin within a second, and a long-poll begins at least
  // a quarter second after the one before it, so a reply grows in even steps; a view asked
  // for after an event goes at once when the second allows it. One request waits for the
  // one before it. (A little more than a second and a quarter: a timer may fire early.)
  const WINDOW_MS = 1020;
  const GAP_MS = 260;
  let gate = Promise.resolve();
  let starts = [];
  let lastPoll = -Infinity;
  function paced(poll) {
    gate = gate.then(async function () {
      for (;;) {
        const now = performance.now();
        starts = starts.filter(function (t) { return t > now - WINDOW_MS; });
        let wait = starts.length >= 4 ? starts[0] + WINDOW_MS - now : 0;
        if (poll) wait = Math.max(wait, lastPoll + GAP_MS - now);
        if (wait <= 0) break;
        await pause(wait);
      }
      const now = performance.now();
      starts.push(now);
      if (poll) lastPoll = now;
    });
    return gate;
  }

  async function follow() {
    while (alive) {
      try {
        const chosen = state().dataset.chosen;
        if (chosen !== watching) {
          watching = chosen;
          after = 0;
          showLive(null);
          liveAt = { reply_id: null, offset: 0 };
          ending = null;
        }
        if (chosen) {
          // The conversation, where the page is in it, and what it has of the live reply:
          // IDs and numbers only, never text or a token (H4).
          const params = new URLSearchParams({ c: chosen, after: String(after),
                                               live: JSON.stringify(liveAt) });
          await paced(true);
          const asked = Date.now();
          const response = await fetch("/api/events?" + params.toString(),
                                       { credentials: "same-origin",
                                         headers: { "X-Clankie-Key": key } });
          const reply = await response.json();
          if (response.status === 401) {
            revoked(reply.message);
            return;
          }
          let news = false;
          let gone = false;
          if (response.ok) {
            after = reply.next_after;
            if (reply.live !== undefined && watching === state().dataset.chosen) {
              news = isNews(reply.live);
              // Gone from memory: its message (or why not) is in this answer or an earlier
              // one (D5), so it stays shown until the view that says it (no gap).
              gone = live !== null && (reply.live === null ||
                                       reply.live.reply_id !== live.reply_id);
              if (gone) ending = { reply_id: live.reply_id, after: views };
              if (!gone) showLive(reply.live);
            }
          }
          if (alive && !busy && (!response.ok || reply.changed || gone ||
                                 performance.now() - lastView >= 1000)) await refresh();
          if (gone && ending === null && watching === state().dataset.chosen) {
            showLive(reply.live);  // the next try, or the next reply
          }
          // Nothing new, at once: the service had no long-poll to spare (V5, many tabs):
          // wait a second rather than ask again in a loop.
          if (!response.ok || (!reply.changed && !news && Date.now() - asked < 500)) {
            await pause(1000);
          }
        } else {
          await pause(1000);
          if (alive && !busy) await refresh();
        }
      } catch (e) {
        unreachable();  // the service stopped, or a proxy before it says so: try again
        await pause(1000);
      }
    }
  }

  // ------------------------------------------------------------ the live reply (D17)

  // Text from others made visible as the view's own text is (SPEC section 10, the same
  // rule as clankie.text.visible): control and invisible format characters as escapes; a
  // joiner stays only between two shown non-ASCII characters. Its last character waits for
  // the next delta (a joiner's form depends on what follows it).
  const HIDDEN = /^[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]$/u;
  const SPACE = /^\p{Zs}$/u;
  const ANY_HIDDEN = /[^\P{Cc}\n\t]|[\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;
  function hidden(ch) { return ch !== "\n" && ch !== "\t" && HIDDEN.test(ch); }
  function joinable(ch) { return ch.codePointAt(0) > 0x7f && !hidden(ch) && !SPACE.test(ch); }
  function shownAs(before, ch, next) {
    if (!hidden(ch)) return ch;
    if ((ch === "\u200c" || ch === "\u200d") && before && next && joinable(before) &&
        joinable(next)) return ch;
    const code = ch.codePointAt(0);
    const hex = code.toString(16);
    return code <= 0xff ? "\\x" + hex.padStart(2, "0")
      : code <= 0xffff ? "\\u" + hex.padStart(4, "0") : "\\U" + hex.padStart(8, "0");
  }

  const liveBox = document.createElement("section");
  liveBox.id = "live";
  liveBox.className = "live";
  liveBox.hidden = true;
  liveBox.setAttribute("aria-label", "Clankie's reply, as it is written");
  // Not announced while it grows (D17): the stored message is, once (#said).
  liveBox.setAttribute("aria-live", "off");
  liveBox.setAttribute("aria-busy", "true");
  const liveState = document.createElement("p");
  liveState.id = "live-state";
  liveState.className = "live-head";
  const liveText = document.createElement("p");
  liveText.id = "live-text";
  liveText.className = "live-text";
  const liveWords = document.createElement("span");
  liveWords.className = "theirs";
  liveWords.hidden = true;
  const fixed = document.createTextNode("");
  const last = document.createTextNode("");
  liveWords.append(fixed, last);
  liveText.append(liveWords);
  const liveCalling = document.createElement("p");
  liveCalling.id = "live-calling";
  liveCalling.className = "quiet";
  liveBox.append(liveState, liveText, liveCalling);
  let before = "";  // the character before the last one shown, and the last one
  let lastChar = "";

  // The element stays where it is (D17): taking it out and putting it back would reset the
  // reader's scroll and drop their selection. Only a redrawn view (a new, empty slot) moves
  // it, and then what the reader had, scroll and selection, is put back as it was; `held`
  // is taken before the old view goes (a range inside it collapses when it leaves).
  function holdLive() {
    const selection = window.getSelection();
    const range = selection && selection.rangeCount ? selection.getRangeAt(0) : null;
    const chosen = range && liveBox.contains(range.startContainer) &&
      liveBox.contains(range.endContainer)
      ? [range.startContainer, range.startOffset, range.endContainer, range.endOffset] : null;
    return { scrolled: liveText.scrollTop, chosen: chosen };
  }

  function placeLive(held) {
    const slot = document.getElementById("live-slot");
    if (!slot || liveBox.parentNode === slot) return;
    const kept = held || holdLive();
    slot.appendChild(liveBox);
    liveText.scrollTop = kept.scrolled;
    if (kept.chosen) {
      const again = document.createRange();
      again.setStart(kept.chosen[0], kept.chosen[1]);
      again.setEnd(kept.chosen[2], kept.chosen[3]);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(again);
    }
  }

  function isNews(next) {
    if (next === null) return live !== null;
    return live === null || next.reply_id !== live.reply_id || next.text.length > 0 ||
      next.state !== live.state || next.calling.length !== live.calling.length;
  }

  // Only this element changes (H6, D17): the question, its form and the typed text are
  // never redrawn by a live update. Text goes in as text (appended to a text node).
  function showLive(next) {
    if (next === undefined) return;
    if (next === null) {
      live = null;
      liveBox.hidden = true;
      fixed.data = "";
      last.data = "";
      before = lastChar = "";
      liveWords.hidden = true;
      liveAt = { reply_id: null, offset: 0 };
      return;
    }
    const follow = liveText.scrollTop + liveText.clientHeight >= liveText.scrollHeight - 8;
    if (live === null || next.reply_id !== live.reply_id || next.offset === 0 ||
        next.offset !== liveAt.offset) {
      fixed.data = "";  // a snapshot: the text so far, in one piece (D4)
      last.data = "";
      before = lastChar = "";
    }
    const given = lastChar + next.text;
    if (next.text && !ANY_HIDDEN.test(given)) {
      // Nothing to make visible (the usual case): the text as it came, in one step.
      const tail = given.charCodeAt(given.length - 1);  // a pair's low half: two units
      const end = tail >= 0xdc00 && tail <= 0xdfff && given.length > 1 ? 2 : 1;
      const shown = given.slice(0, given.length - end);
      if (shown) fixed.appendData(shown);
      before = "";  // only a hidden last character looks back, and this one is not
      lastChar = given.slice(given.length - end);
    } else {
      let out = "";
      for (const ch of next.text) {
        if (lastChar) out += shownAs(before, lastChar, ch);
        before = lastChar;
        lastChar = ch;
      }
      if (out) fixed.appendData(out);
    }
    const lastShown = lastChar ? shownAs(before, lastChar, "") : "";
    if (last.data !== lastShown) last.data = lastShown;  // a selection ending in it stays
    liveWords.hidden = !(fixed.length || last.length);
    live = { reply_id: next.reply_id, state: next.state, idle_ms: next.idle_ms,
             elapsed_ms: Date.parse(next.at) - Date.parse(next.started_at),
             got: Date.now(), calling: next.calling };
    liveAt = { reply_id: next.reply_id, offset: next.length };
    liveCalling.textContent = next.calling.length
      ? "Calling " + next.calling.join(", ") + "…" : "";
    liveCalling.hidden = !next.calling.length;
    liveBox.hidden = false;
    placeLive();
    sayLiveState();
    if (follow) liveText.scrollTop = liveText.scrollHeight;
  }

  // How long, from the service's idle_ms and the reply's own times, counted on with this
  // browser's clock from when it came (never compared with the service's clock).
  function sayLiveState() {
    if (live === null) return;
    const since = Date.now() - live.got;
    const idle = Math.floor((live.idle_ms + since) / 1000);
    const stall = Number(state().dataset.stall) || 0;
    let words;
    if (live.state === "waiting") {
      words = "Waiting for the model (" + idle + " s)";
    } else if (live.state === "quiet") {
      words = "No text from the model for " + idle + " s" +
        (stall ? "; giving up at " + stall + " s" : "");
    } else if (live.state === "complete") {
      words = "Clankie has finished writing; keeping the reply…";
    } else {
      words = "Clankie is writing (" +
        Math.max(0, Math.floor((live.elapsed_ms + since) / 1000)) + " s)";
    }
    if (liveState.textContent !== words) liveState.textContent = words;
  }

  // After each view: a reply gone from memory leaves the page with the view that says
  // what became of it (its stored message, a withdrawal, the run's end), in the same
  // step, so it is shown once and never missing (D5, D17). Clankie's stored messages
  // new since the page came are announced once, to screen readers (#said).
  function settle(number) {
    if (ending !== null && number > ending.after) {
      ending = null;
      showLive(null);
    }
    const chosen = state().dataset.chosen || "";
    const stored = view.querySelectorAll("#context li[data-message]");
    if (seenIn !== chosen || seen === null) {
      seen = new Set();
      seenIn = chosen;
      for (const li of stored) seen.add(li.dataset.message);
      return;
    }
    const fresh = [];
    for (const li of stored) {
      if (seen.has(li.dataset.message)) continue;
      seen.add(li.dataset.message);
      fresh.push(li.textContent.replace(/\s+/g, " ").trim());
    }
    if (fresh.length) document.getElementById("said").textContent = fresh.join(" ");
  }

  tick();
  setInterval(tick, 1000);
  // The shell carries no data (H3): the view comes with both halves, then the live updates.
  refresh().catch(function () {}).then(follow);
})();
