/* The graph explorer: search an entity, draw its neighbourhood with Cytoscape.js,
   expand a node on click, show a triple (and a link to its source chunk) on edge click. */
(function () {
  "use strict";
  var root = document.getElementById("graph-explorer");
  if (!root) return;
  var container = document.getElementById("graph");
  var status = document.getElementById("graph-status");
  var details = document.getElementById("graph-selection");
  var form = document.getElementById("graph-search");
  var entityInput = document.getElementById("graph-entity");
  var options = document.getElementById("graph-entity-options");
  var confidence = document.getElementById("graph-confidence");
  var confidenceValue = document.getElementById("graph-confidence-value");
  var table = document.getElementById("graph-table");

  if (typeof window.cytoscape !== "function") {
    status.textContent = "The graph cannot be drawn: the Cytoscape.js library is missing " +
      "(run python -m retrieval.static_vendor).";
    status.className = "errornote";
    return;
  }

  var cy = window.cytoscape({
    container: container,
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: {
        "label": "data(label)", "background-color": "#79aec8", "color": "#333",
        "font-size": 11, "text-valign": "bottom", "text-margin-y": 4, "width": 22, "height": 22 } },
      { selector: "node.focus", style: { "background-color": "#417690", "width": 32, "height": 32 } },
      { selector: "node.expanded", style: { "border-width": 3, "border-color": "#205067" } },
      { selector: "edge", style: {
        "label": "data(predicate)", "font-size": 9, "color": "#666", "curve-style": "bezier",
        "target-arrow-shape": "triangle", "line-color": "#bbb", "target-arrow-color": "#bbb",
        "width": "mapData(confidence, 0, 1, 1, 5)", "text-rotation": "autorotate",
        "text-background-color": "#fff", "text-background-opacity": 0.85,
        "text-background-padding": 1 } },
      { selector: ":selected", style: { "line-color": "#ba2121", "target-arrow-color": "#ba2121",
        "background-color": "#ba2121" } }
    ]
  });
  window.retrievalGraph = cy;  // for the screen tests and the curious

  function filters() {
    var params = new URLSearchParams();
    params.set("hops", document.getElementById("graph-hops").value);
    var predicate = document.getElementById("graph-predicate").value;
    if (predicate) params.set("predicate", predicate);
    params.set("min_confidence", confidence.value);
    return params;
  }

  function updateCounts() {
    container.dataset.nodeCount = cy.nodes().length;
    container.dataset.edgeCount = cy.edges().length;
    listTriples();
  }

  function expandButton(id) {
    var node = cy.getElementById(id);
    var button = text("button", node.data("label") || id);
    button.type = "button";
    button.addEventListener("click", function () { expand(node); });
    return button;
  }

  // The drawing's text alternative: one row a triple, kept in step with the drawing.
  function listTriples() {
    var rows = cy.edges().map(function (edge) {
      var data = edge.data();
      var row = document.createElement("tr");
      row.dataset.triple = data.id;
      var subject = document.createElement("td");
      var object = document.createElement("td");
      var source = document.createElement("td");
      subject.append(expandButton(data.source));
      object.append(expandButton(data.target));
      if (data.chunk_id) source.append(chunkLink(data));
      row.append(subject, text("td", data.predicate), object,
                 text("td", Number(data.confidence).toFixed(2)), source);
      return row;
    });
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], rows);
    table.hidden = !rows.length;
  }

  function fetchNeighbourhood(entity, hops) {
    var params = filters();
    params.set("entity", entity);
    if (hops) params.set("hops", hops);
    return fetch(root.dataset.neighbourhoodUrl + "?" + params.toString(), {
      credentials: "same-origin", headers: { "Accept": "application/json" }
    }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) throw new Error(body.error || response.statusText);
        return body;
      });
    });
  }

  function add(graph) {
    var added = cy.collection();
    graph.nodes.forEach(function (node) {
      if (cy.getElementById(node.id).empty()) {
        added = added.union(cy.add({ group: "nodes", data: { id: node.id, label: node.label } }));
      }
    });
    graph.edges.forEach(function (edge) {
      var id = "t" + edge.id;
      if (cy.getElementById(id).empty()) {
        added = added.union(cy.add({ group: "edges", data: {
          id: id, source: edge.source, target: edge.target, predicate: edge.predicate,
          subject: edge.subject, object: edge.object, confidence: edge.confidence,
          chunk_id: edge.chunk_id, document: edge.document } }));
      }
    });
    return added;
  }

  function layout() {
    // The page above the graph may have moved it (status text, messages): Cytoscape only
    // notices resizes and scrolls, and would map clicks through its stale position.
    cy.resize();
    cy.layout({ name: "cose", animate: false, nodeDimensionsIncludeLabels: true,
                padding: 30, randomize: false }).run();
    updateCounts();
  }

  function show(entity) {
    status.textContent = "Loading…";
    fetchNeighbourhood(entity).then(function (graph) {
      cy.elements().remove();
      if (!graph.nodes.length) {
        status.textContent = "No entity matches \u201c" + entity + "\u201d.";
        updateCounts();
        return;
      }
      add(graph);
      cy.getElementById(graph.entity).addClass("focus expanded");
      layout();
      status.textContent = graph.nodes.length + " entities, " + graph.edges.length +
        " triples around \u201c" + cy.getElementById(graph.entity).data("label") + "\u201d.";
    }).catch(function (error) { status.textContent = "Error: " + error.message; });
  }

  function expand(node) {
    status.textContent = "Expanding \u201c" + node.data("label") + "\u201d…";
    fetchNeighbourhood(node.id(), 1).then(function (graph) {
      var added = add(graph);
      node.addClass("expanded");
      layout();
      status.textContent = "\u201c" + node.data("label") + "\u201d expanded: " +
        added.nodes().length + " new entities, " + added.edges().length + " new triples.";
    }).catch(function (error) { status.textContent = "Error: " + error.message; });
  }

  function text(tag, value, className) {
    var element = document.createElement(tag);
    element.textContent = value;
    if (className) element.className = className;
    return element;
  }

  function showTriple(edge) {
    var data = edge.data();
    details.replaceChildren();
    var triple = document.createElement("p");
    triple.className = "graph-triple";
    triple.append(text("span", data.subject), " ", text("b", data.predicate), " ",
                  text("span", data.object));
    details.append(triple, text("p", "Confidence " + Number(data.confidence).toFixed(2)));
    if (data.chunk_id) {
      var link = chunkLink(data);
      link.textContent = "Open source chunk" + (data.document ? " (" + data.document + ")" : "");
      link.id = "graph-chunk-link";
      details.append(link);
    }
  }

  function chunkLink(data) {
    var link = document.createElement("a");
    link.href = root.dataset.chunkUrl.replace("/0/", "/" + data.chunk_id + "/");
    link.textContent = data.document || "chunk " + data.chunk_id;
    return link;
  }

  cy.on("tap", "node", function (event) { expand(event.target); });
  cy.on("tap", "edge", function (event) { showTriple(event.target); });

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    show(entityInput.value.trim());
  });
  document.getElementById("graph-fit").addEventListener("click", function () { cy.fit(null, 30); });
  confidence.addEventListener("input", function () {
    confidenceValue.textContent = Number(confidence.value).toFixed(2);
  });

  var pending = null;
  entityInput.addEventListener("input", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      fetch(root.dataset.entitiesUrl + "?q=" + encodeURIComponent(entityInput.value), {
        credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (body) {
          options.replaceChildren.apply(options, (body.entities || []).map(function (entity) {
            var option = document.createElement("option");
            option.value = entity.label;
            return option;
          }));
        });
    }, 200);
  });

  if (root.dataset.initialEntity) show(root.dataset.initialEntity);
})();
