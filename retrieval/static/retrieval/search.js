/* The results page's small helpers; the page works without them.
 * Clicks: following a result posts {token, document} to the clicks endpoint (a beacon,
 * which outlives the page being left). Votes: the Yes/No forms, and the answer's Helpful /
 * Not helpful, post to the feedback endpoint in place instead of leaving the page. Answer:
 * the "Answer this question" link streams the answer from the answer API in place (tokens
 * as they come, then the sources, or the closest documents when it abstains, linked as the
 * server-rendered box links them); on any failure it follows the link.
 * Suggestions: the search box becomes an ARIA combobox offering what the suggestions
 * endpoint answers for the typed text (up/down to move, Enter to search, Escape to close);
 * without the script it is a plain search box. */
(function () {
  "use strict";
  var box = document.querySelector("input[data-suggest-url]");
  var suggestions = document.getElementById("retrieval-suggestions");
  if (box && suggestions && window.fetch && window.URLSearchParams) {
    offerSuggestions(box, suggestions, document.getElementById("retrieval-suggestions-status"));
  }
  var list = document.querySelector(".retrieval-results[data-click-url]");
  if (list) {
    var sent = {};
    var record = function (event) {
      var link = event.target.closest("a[data-retrieval-click]");
      if (!link || !list.contains(link) || (event.type === "auxclick" && event.button !== 1)) return;
      var documentId = link.getAttribute("data-retrieval-click");
      if (sent[documentId]) return;
      sent[documentId] = true;
      var body = new URLSearchParams();
      body.append("token", list.getAttribute("data-click-token"));
      body.append("document", documentId);
      body.append("csrfmiddlewaretoken", list.getAttribute("data-csrf") || "");
      var url = list.getAttribute("data-click-url");
      if (!(navigator.sendBeacon && navigator.sendBeacon(url, body))) {
        fetch(url, { method: "POST", body: body, keepalive: true, credentials: "same-origin" });
      }
    };
    list.addEventListener("click", record);
    list.addEventListener("auxclick", record);
  }
  document.querySelectorAll("form.retrieval-vote").forEach(function (form) {
    votesInPlace(form, function (button) {
      return {
        collection: form.elements.collection.value,
        query: form.elements.query.value,
        chunk_id: Number(form.elements.chunk_id.value),
        relevant: button.value === "true"
      };
    });
  });
  document.querySelectorAll("form.retrieval-answer-vote").forEach(answerVotesInPlace);

  function answerVotesInPlace(form) {
    votesInPlace(form, function (button) {
      return { trace_id: Number(form.elements.trace_id.value), helpful: button.value === "true" };
    });
  }

  function votesInPlace(form, bodyOf) {
    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !window.fetch) return;
      event.preventDefault();
      var status = form.querySelector(".retrieval-vote-status");
      fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          "Accept": "application/json",
          "X-CSRFToken": form.elements.csrfmiddlewaretoken.value
        },
        body: JSON.stringify(bodyOf(button))
      }).then(function (response) {
        if (!response.ok) throw new Error(response.status);
        form.querySelectorAll("button").forEach(function (b) {
          b.setAttribute("aria-pressed", String(b === button));
        });
        status.textContent = "Thanks, your vote is recorded.";
      }).catch(function () {
        status.textContent = "Your vote could not be recorded.";
      });
    });
  }

  var ask = document.querySelector("a.retrieval-ask[data-stream-url]");
  var askBody = document.getElementById("retrieval-answer-body");
  if (ask && askBody && window.fetch && window.TextDecoder) {
    ask.addEventListener("click", function (event) {
      event.preventDefault();
      streamAnswer(ask, JSON.parse(askBody.textContent));
    });
  }

  function offerSuggestions(input, list, status) {
    var active = -1, asked = 0, timer = null;
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("autocomplete", "off");
    var options = function () { return list.querySelectorAll("[role=option]"); };
    var open = function (shown) {
      list.hidden = !shown;
      input.setAttribute("aria-expanded", String(shown));
      if (!shown) select(-1);
    };
    var select = function (index) {
      active = index;
      options().forEach(function (option, i) {
        option.setAttribute("aria-selected", String(i === index));
      });
      if (index < 0) input.removeAttribute("aria-activedescendant");
      else input.setAttribute("aria-activedescendant", options()[index].id);
    };
    var show = function (found) {
      list.textContent = "";
      found.forEach(function (text, i) {
        var option = document.createElement("li");
        option.id = "retrieval-suggestion-" + i;
        option.setAttribute("role", "option");
        option.textContent = text;
        list.appendChild(option);
      });
      select(-1);
      open(found.length > 0);
      if (status) {
        status.textContent = !found.length ? "" : found.length === 1 ? "1 suggestion."
          : found.length + " suggestions, up and down arrows to choose.";
      }
    };
    var choose = function (option) {
      input.value = option.textContent;
      open(false);
      if (input.form.requestSubmit) input.form.requestSubmit();
      else input.form.submit();
    };
    var ask = function () {
      var number = ++asked;
      var collection = input.form.elements.collection;
      if (!input.value.trim()) return show([]);
      var params = new URLSearchParams({ q: input.value, collection: collection ? collection.value : "" });
      fetch(input.getAttribute("data-suggest-url") + "?" + params, {
        credentials: "same-origin",
        headers: { "Accept": "application/json" }
      }).then(function (response) {
        if (!response.ok) throw new Error(response.status);
        return response.json();
      }).then(function (data) {
        if (number === asked && document.activeElement === input) show(data.suggestions);
      }).catch(function () {
        if (number === asked) show([]);
      });
    };
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(ask, 150);  // one request a pause in typing, not a keystroke
    });
    input.addEventListener("keydown", function (event) {
      var count = options().length;
      if ((event.key === "ArrowDown" || event.key === "ArrowUp") && count) {
        event.preventDefault();
        open(true);
        var next = active + (event.key === "ArrowDown" ? 1 : -1);
        select(next < 0 ? count - 1 : next >= count ? 0 : next);
      } else if (event.key === "Enter" && !list.hidden && active >= 0) {
        event.preventDefault();
        choose(options()[active]);
      } else if (event.key === "Escape" && !list.hidden) {
        event.preventDefault();  // a search box would clear its text too
        open(false);
      }
    });
    list.addEventListener("mousedown", function (event) { event.preventDefault(); });  // keep the focus
    list.addEventListener("click", function (event) {
      var option = event.target.closest("[role=option]");
      if (option) choose(option);
    });
    input.addEventListener("blur", function () { open(false); });
    if (input.form.elements.collection) {
      input.form.elements.collection.addEventListener("change", function () { show([]); });
    }
  }

  function streamAnswer(link, body) {
    var section = link.closest(".retrieval-answer");
    var text = document.createElement("p");
    text.className = "retrieval-answer-text";
    text.setAttribute("aria-busy", "true");
    section.setAttribute("aria-live", "polite");
    link.parentNode.replaceWith(text);
    var shown = "";
    var fallBack = function () { window.location.href = link.href; };
    fetch(link.getAttribute("data-stream-url"), {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "X-CSRFToken": link.getAttribute("data-csrf")
      },
      body: JSON.stringify(body)
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (!response.ok || !response.body || type.indexOf("text/event-stream") !== 0) {
        throw new Error(response.status);
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      var finished = false;
      var handle = function (kind, data) {
        if (kind === "token") {
          shown += data.text;
          text.textContent = shown;
        } else if (kind === "reset") {
          shown = "";
          text.textContent = "";
        } else if (kind === "answer") {
          finished = true;
          showAnswer(section, text, data);
        } else if (kind === "error") {
          finished = true;
          showError(section, text, data.detail);
        }
      };
      var pump = function () {
        return reader.read().then(function (chunk) {
          if (chunk.done) {
            if (!finished) showError(section, text, "the answer was cut off.");
            return;
          }
          buffer += decoder.decode(chunk.value, { stream: true });
          var messages = buffer.split("\n\n");
          buffer = messages.pop();
          messages.forEach(function (message) {
            var kind = "", data = "";
            message.split("\n").forEach(function (line) {
              if (line.indexOf("event: ") === 0) kind = line.slice(7);
              else if (line.indexOf("data: ") === 0) data += line.slice(6);
            });
            if (kind && data) handle(kind, JSON.parse(data));
          });
          return pump();
        });
      };
      return pump();
    }).catch(function () {
      if (!shown) fallBack();
      else showError(section, text, "the answer could not be finished.");
    });
  }

  function showAnswer(section, text, answer) {
    text.removeAttribute("aria-busy");
    text.textContent = "";
    if (answer.abstained) text.classList.add("retrieval-abstained");
    var numbers = {};
    answer.sources.forEach(function (source) { numbers[source.number] = true; });
    answer.text.split(/(\[\d{1,3}\])/).forEach(function (piece) {
      var cited = /^\[(\d{1,3})\]$/.exec(piece);
      if (cited && numbers[cited[1]]) {
        var cite = document.createElement("a");
        cite.href = "#retrieval-source-" + cited[1];
        cite.className = "retrieval-cite";
        cite.setAttribute("aria-label", "source " + cited[1]);
        cite.textContent = piece;
        text.appendChild(cite);
      } else if (piece) {
        text.appendChild(document.createTextNode(piece));
      }
    });
    var after = text;
    var add = function (element) { after.after(element); after = element; };
    if (answer.sources.length) {
      var title = document.createElement("h3");
      title.className = "retrieval-answer-sources-title";
      title.textContent = "Sources";
      add(title);
      var list = document.createElement("ol");
      list.className = "retrieval-answer-sources";
      answer.sources.forEach(function (source) {
        var item = document.createElement("li");
        item.id = "retrieval-source-" + source.number;
        item.value = source.number;
        item.appendChild(titled(source));
        if (source.quote) {
          item.appendChild(document.createTextNode(": "));
          var quote = document.createElement("q");
          quote.textContent = source.quote;
          item.appendChild(quote);
        }
        list.appendChild(item);
      });
      add(list);
    }
    var closest = answer.abstained ? answer.closest_sources || [] : [];
    if (closest.length) {
      var lead = document.createElement("p");
      lead.textContent = "The closest documents:";
      add(lead);
      var documents = document.createElement("ul");
      documents.className = "retrieval-answer-closest";
      closest.forEach(function (source) {
        var item = document.createElement("li");
        item.appendChild(titled(source));
        documents.appendChild(item);
      });
      add(documents);
    }
    var note = document.createElement("p");
    note.className = "retrieval-answer-note";
    note.textContent = (answer.mode === "extractive" ? "Sentences quoted from the documents"
      : "Written by a language model from the documents") + "; check the sources.";
    add(note);
    if (answer.trace_id && section.getAttribute("data-vote-url")) {
      add(answerVoteForm(section, answer.trace_id));
    }
  }

  function answerVoteForm(section, traceId) {
    var form = document.createElement("form");
    form.className = "retrieval-answer-vote";
    form.method = "post";
    form.action = section.getAttribute("data-vote-url");
    var field = function (name, value) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      form.appendChild(input);
    };
    field("csrfmiddlewaretoken", section.getAttribute("data-csrf"));
    field("trace_id", String(traceId));
    var label = document.createElement("span");
    label.id = "retrieval-answer-vote-label";
    label.textContent = "Was this answer helpful?";
    form.appendChild(label);
    [["true", "Helpful"], ["false", "Not helpful"]].forEach(function (choice) {
      var button = document.createElement("button");
      button.type = "submit";
      button.name = "helpful";
      button.value = choice[0];
      button.textContent = choice[1];
      button.setAttribute("aria-describedby", label.id);
      form.appendChild(button);
    });
    var status = document.createElement("output");
    status.className = "retrieval-vote-status";
    status.setAttribute("aria-live", "polite");
    form.appendChild(status);
    answerVotesInPlace(form);
    return form;
  }

  function titled(source) {
    if (!source.url) return document.createTextNode(source.title);
    var link = document.createElement("a");
    link.href = source.url;
    link.textContent = source.title;
    return link;
  }

  function showError(section, text, detail) {
    text.removeAttribute("aria-busy");
    var error = document.createElement("p");
    error.className = "retrieval-error";
    error.setAttribute("role", "alert");
    error.textContent = "No answer: " + detail;
    text.after(error);
  }
})();
