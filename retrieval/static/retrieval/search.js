/* The results page's small helpers; the page works without them.
 * Clicks: following a result posts {token, document} to the clicks endpoint (a beacon,
 * which outlives the page being left). Votes: the Yes/No forms post to the feedback
 * endpoint in place instead of leaving the page. */
(function () {
  "use strict";
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
    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !window.fetch) return;
      event.preventDefault();
      var status = form.querySelector(".retrieval-vote-status");
      var body = {
        collection: form.elements.collection.value,
        query: form.elements.query.value,
        chunk_id: Number(form.elements.chunk_id.value),
        relevant: button.value === "true"
      };
      fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          "Accept": "application/json",
          "X-CSRFToken": form.elements.csrfmiddlewaretoken.value
        },
        body: JSON.stringify(body)
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
  });
})();
