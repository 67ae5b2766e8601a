// The entry-tree page: open an entry in the panel, load folded branches and
// collapsed runs on demand, jump to an entry. The server renders everything;
// this only fetches HTML fragments and places them.
"use strict";
(function () {
  function fetchHtml(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "XMLHttpRequest" } }).then(
      function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.statusText);
        return response.text();
      }
    );
  }

  function tree() { return document.getElementById("session-tree"); }
  function panel() { return document.getElementById("entry-panel"); }

  function openEntry(entryId, scroll) {
    var container = tree();
    if (!container || !entryId) return;
    var url = container.dataset.entryUrl + encodeURIComponent(entryId) + "/";
    document.querySelectorAll(".entry.selected").forEach(function (el) { el.classList.remove("selected"); });
    var row = document.getElementById("entry-" + entryId);
    if (row) {
      row.classList.add("selected");
      if (scroll) row.scrollIntoView({ block: "center" });
    }
    panel().innerHTML = '<p class="loading">Loading entry ' + entryId + "…</p>";
    fetchHtml(url).then(function (html) {
      panel().innerHTML = html;
      panel().scrollTop = 0;
    }).catch(function (error) {
      panel().innerHTML = '<p class="errornote">Could not load entry ' + entryId + ": " + error.message + "</p>";
    });
  }

  function loadBranch(details) {
    if (details.dataset.loaded) return;
    details.dataset.loaded = "1";
    var body = details.querySelector(".branch-body");
    body.innerHTML = '<p class="loading">Loading…</p>';
    fetchHtml(details.dataset.url).then(function (html) { body.innerHTML = html; }).catch(function (error) {
      delete details.dataset.loaded;
      body.innerHTML = '<p class="errornote">Could not load this branch: ' + error.message + "</p>";
    });
  }

  function expandRun(run) {
    var button = run.querySelector("button");
    if (button) { button.disabled = true; button.textContent = "Loading…"; }
    fetchHtml(run.dataset.url).then(function (html) {
      var holder = document.createElement("div");
      holder.innerHTML = html;
      var parent = run.parentNode;
      while (holder.firstChild) parent.insertBefore(holder.firstChild, run);
      parent.removeChild(run);
    }).catch(function (error) {
      if (button) { button.disabled = false; button.textContent = "Retry (" + error.message + ")"; }
    });
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var run = target.closest(".run-expand");
    if (run && run.closest(".run")) { event.preventDefault(); expandRun(run.closest(".run")); return; }
    var link = target.closest("[data-entry-link]");
    if (link) {
      var id = link.getAttribute("data-entry-link");
      if (document.getElementById("entry-" + id)) {
        event.preventDefault();
        openEntry(id, true);
        return;
      }
      if (link.tagName !== "A") {
        window.location = tree().baseURI.split("#")[0].split("?")[0] + "?focus=" + encodeURIComponent(id) + "#entry-" + id;
      }
      return;
    }
    if (target.closest("a, button, input, select, textarea, summary, form")) return;
    var row = target.closest(".entry[data-entry]");
    if (row && (row.closest("#session-tree") || row.closest("#matches"))) {
      event.preventDefault();
      openEntry(row.dataset.entry, false);
    }
  });

  document.addEventListener("click", function (event) {
    var idLink = event.target.closest("a.entry-id");
    if (!idLink) return;
    var row = idLink.closest(".entry[data-entry]");
    if (row) { event.preventDefault(); openEntry(row.dataset.entry, false); }
  }, true);

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details.matches && details.matches("details.branch") && details.open) loadBranch(details);
  }, true);

  document.addEventListener("DOMContentLoaded", function () {
    var container = tree();
    if (!container) return;
    var focus = container.dataset.focus || (location.hash.indexOf("#entry-") === 0 ? location.hash.slice(7) : "");
    if (focus && document.getElementById("entry-" + focus)) openEntry(focus, true);
  });
})();
