// Chat page of the eco-challenge gateway: plain JavaScript, no build step, no dependencies.
//
// One EventSource per question. It listens for the three named events of SPEC "SSE events":
//   challenge -> append data.data (display text) to the bot bubble as it arrives
//   close     -> the bubble keeps only the recommend and the challenges become cards (each
//                description is on the page once), then the suggestions become chips that
//                send their text as the next message; es.close()
//   error     -> keep what was shown, add the envelope's Korean message, then es.close()
// Closing on every terminal event matters: an EventSource reconnects by itself when a
// response ends. A dropped connection is different: it reaches the same "error" listener as a
// plain Event (no data) and the page lets the browser reconnect. The browser sends the id of
// the last event it got (Last-Event-ID, ids are "<streamId>.<n>"), and the gateway continues
// that same answer after it, or answers 204 when there is nothing left to resume, which stops
// the browser for good (readyState CLOSED): then the drop is reported. Events whose number
// was already shown are skipped, so no text is ever added twice.
"use strict";

(() => {
  const MAX_CHARS = 100;
  const MAX_RECONNECTS = 5; // reconnects in a row that bring nothing new before giving up
  const BASE_INFO_URL = "ai/chatbot/recommendation/base-info"; // relative: works behind a prefix
  const FREE_TEXT_URL = "ai/chatbot/recommendation/free-text";
  const FIELD_LABELS = {
    location: "지역",
    workType: "근무 형태",
    category: "카테고리",
    message: "메시지",
    sessionId: "세션",
  };
  const TEXT = {
    thinking: "답변을 만드는 중이에요…",
    dropped: "연결이 끊겼어요. 잠시 후 다시 시도해 주세요.",
    reconnecting: "연결이 잠시 끊겼어요. 다시 연결하는 중이에요…",
    generic: "일시적인 오류가 발생했어요. 잠시 후 다시 시도해 주세요.",
    empty: "메시지를 입력해 주세요.",
    fields: "확인할 항목: ",
    suggestions: "이어서 물어보기",
  };

  const sessionId = newSessionId();
  const log = document.getElementById("chat-log");
  const baseForm = document.getElementById("base-info");
  const textForm = document.getElementById("free-text");
  const input = document.getElementById("message");
  const counter = document.getElementById("message-count");
  const status = document.getElementById("status");
  const submitButtons = document.querySelectorAll("button[type=submit]");

  let current = null; // the EventSource of the answer being streamed, if any

  function newSessionId() {
    if (window.crypto && typeof window.crypto.randomUUID === "function") {
      return window.crypto.randomUUID();
    }
    // randomUUID exists only in secure contexts (https, localhost); plain http on a LAN
    // address still has getRandomValues.
    const bytes = window.crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function nearBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  function keepScrolled(wasNearBottom) {
    if (wasNearBottom) log.scrollTop = log.scrollHeight;
  }

  function addUserMessage(text) {
    const item = el("li", "msg user");
    item.appendChild(el("div", "bubble", text));
    log.appendChild(item);
    log.scrollTop = log.scrollHeight;
  }

  // The bot's answer: a bubble whose text grows, then cards or an error note below it.
  function addBotMessage() {
    const item = el("li", "msg bot");
    item.dataset.state = "streaming";
    const bubble = el("div", "bubble");
    const text = el("span", "bubble-text");
    const typing = el("span", "typing");
    typing.setAttribute("aria-hidden", "true");
    typing.append(el("span"), el("span"), el("span"));
    bubble.append(text, typing);
    item.appendChild(bubble);
    log.appendChild(item);
    log.scrollTop = log.scrollHeight;
    const textNode = document.createTextNode("");
    text.appendChild(textNode);
    return { item, bubble, text, textNode, typing };
  }

  function setBusy(busy) {
    log.setAttribute("aria-busy", busy ? "true" : "false");
    submitButtons.forEach((button) => {
      button.disabled = busy;
    });
    status.textContent = busy ? TEXT.thinking : "";
  }

  function parseEnvelope(raw) {
    try {
      const envelope = JSON.parse(raw);
      return envelope && typeof envelope === "object" ? envelope : null;
    } catch {
      return null;
    }
  }

  function renderCards(message, challenges) {
    if (!Array.isArray(challenges) || challenges.length === 0) return;
    const list = el("ul", "cards");
    list.setAttribute("aria-label", "추천 챌린지");
    for (const challenge of challenges) {
      const card = el("li", "card");
      if (challenge.label) card.appendChild(el("span", "badge", String(challenge.label)));
      card.appendChild(el("h3", "card-title", String(challenge.title || "")));
      if (challenge.description) {
        card.appendChild(el("p", "card-text", String(challenge.description)));
      }
      list.appendChild(card);
    }
    message.item.appendChild(list);
  }

  // Follow-ups to tap (close.data.data.suggestions): each sends its text as if typed. Only the
  // newest answer has them: asking anything removes them (clearSuggestions).
  function renderSuggestions(message, suggestions) {
    if (!Array.isArray(suggestions)) return;
    const texts = suggestions.filter((s) => typeof s === "string" && s.trim());
    if (texts.length === 0) return;
    const group = el("div", "suggestions");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", TEXT.suggestions);
    for (const text of texts) {
      const chip = el("button", "chip", text.trim());
      chip.type = "button";
      chip.addEventListener("click", () => {
        // The chip goes with the question it sends: a keyboard user lands in the message box
        // (a tap does not, so no on-screen keyboard opens).
        const byKeyboard = chip.matches(":focus-visible");
        if (sendText(text) && byKeyboard) input.focus();
      });
      group.appendChild(chip);
    }
    message.item.appendChild(group);
  }

  function clearSuggestions() {
    log.querySelectorAll(".suggestions").forEach((group) => group.remove());
  }

  function renderError(message, text, details) {
    const note = el("p", "error-note");
    const icon = el("span", "error-icon", "!");
    icon.setAttribute("aria-hidden", "true");
    note.append(icon, el("span", "error-text", text));
    const fields = details && Array.isArray(details.invalidFields) ? details.invalidFields : [];
    if (fields.length) {
      const names = fields.map((field) => FIELD_LABELS[field] || field).join(", ");
      note.appendChild(el("span", "error-fields", TEXT.fields + names));
    }
    if (!message.text.textContent) message.bubble.hidden = true;
    message.item.appendChild(note);
  }

  function finish(es, message, state) {
    es.close();
    if (current === es) current = null;
    message.item.dataset.state = state;
    message.typing.remove();
    setBusy(false);
  }

  function ask(path, params) {
    if (current) return; // one answer at a time
    const url = new URL(path, document.baseURI);
    url.searchParams.set("sessionId", sessionId);
    for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);

    clearSuggestions();
    const message = addBotMessage();
    setBusy(true);
    const es = new EventSource(url);
    current = es;
    let lastSeq = 0; // number of the newest event shown
    let reconnects = 0;

    // False for an event already shown; ids are "<streamId>.<n>".
    function isNew(event) {
      const seq = Number(String(event.lastEventId).split(".").pop());
      if (Number.isInteger(seq) && seq > 0) {
        if (seq <= lastSeq) return false;
        lastSeq = seq;
      }
      reconnects = 0;
      return true;
    }

    es.addEventListener("open", () => {
      if (current === es) status.textContent = TEXT.thinking;
    });

    es.addEventListener("challenge", (event) => {
      if (!isNew(event)) return;
      const envelope = parseEnvelope(event.data);
      if (!envelope || typeof envelope.data !== "string") return;
      const wasNearBottom = nearBottom();
      message.textNode.appendData(envelope.data);
      keepScrolled(wasNearBottom);
    });

    es.addEventListener("close", (event) => {
      if (current !== es || !isNew(event)) return;
      const envelope = parseEnvelope(event.data);
      const result = envelope && envelope.data ? envelope.data : {};
      const wasNearBottom = nearBottom();
      // The streamed text was the recommend, then each challenge's title and description:
      // the cards show the challenges now, so the bubble keeps the recommend alone.
      if (typeof result.recommend === "string") message.textNode.data = result.recommend;
      finish(es, message, "done");
      message.bubble.hidden = !message.textNode.data;
      renderCards(message, result.challenges);
      renderSuggestions(message, result.suggestions);
      keepScrolled(wasNearBottom);
    });

    // Both the server's `event: error` (a MessageEvent with data) and a failed or dropped
    // connection (a plain Event) arrive here. The first ends the stream; after the second the
    // browser reconnects by itself (CONNECTING) unless it was refused (CLOSED: a 204 or an
    // HTTP error), and the page gives up after a few reconnects that brought nothing.
    es.addEventListener("error", (event) => {
      if (current !== es) return;
      const fromServer = typeof event.data === "string";
      if (!fromServer && es.readyState === EventSource.CONNECTING && reconnects < MAX_RECONNECTS) {
        reconnects += 1;
        status.textContent = TEXT.reconnecting;
        return;
      }
      const wasNearBottom = nearBottom();
      const envelope = fromServer ? parseEnvelope(event.data) : null;
      const text = envelope && typeof envelope.message === "string" ? envelope.message : null;
      finish(es, message, "error");
      renderError(message, text || (fromServer ? TEXT.generic : TEXT.dropped), envelope?.data);
      keepScrolled(wasNearBottom);
    });
  }

  function selectedText(select) {
    return select.options[select.selectedIndex].textContent;
  }

  baseForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (current) return;
    const form = baseForm.elements;
    addUserMessage(
      `${selectedText(form.location)} · ${selectedText(form.workType)} · ` +
        `${selectedText(form.category)} 챌린지를 추천해 주세요.`,
    );
    ask(BASE_INFO_URL, {
      location: form.location.value,
      workType: form.workType.value,
      category: form.category.value, // the code; the option shows the Korean label
    });
  });

  function capped(value) {
    // maxlength counts UTF-16 units and an IME may overshoot it while composing.
    const chars = Array.from(value);
    return chars.length > MAX_CHARS ? chars.slice(0, MAX_CHARS).join("") : value;
  }

  function updateCounter() {
    counter.textContent = `${Array.from(input.value).length}/${MAX_CHARS}`;
  }

  input.addEventListener("input", updateCounter);
  input.addEventListener("compositionend", () => {
    const value = capped(input.value);
    if (value !== input.value) input.value = value;
    updateCounter();
  });

  // A free-text turn, typed or a suggestion tapped: the same cap, path and session.
  function sendText(raw) {
    if (current) return false;
    const text = capped(raw).trim();
    if (!text) {
      status.textContent = TEXT.empty;
      input.focus();
      return false;
    }
    addUserMessage(text);
    ask(FREE_TEXT_URL, { message: text });
    return true;
  }

  textForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (sendText(input.value)) {
      input.value = "";
      updateCounter();
    }
  });

  input.addEventListener("keydown", (event) => {
    // Enter that confirms a Hangul syllable must not also send the message.
    if (event.key === "Enter" && event.isComposing) event.preventDefault();
  });

  window.addEventListener("pagehide", () => {
    if (current) current.close();
  });
})();
