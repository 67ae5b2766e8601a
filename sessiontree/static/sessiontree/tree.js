// The entry-tree page: open an entry in the panel, load folded branches and
// collapsed runs on demand, keep the address in step with what is shown
// (?focus=<entry> is the entry open in the panel: Back and Forward work, and
// the address can be shared), and move through the tree with the keyboard.
// The server renders everything; this only fetches HTML fragments and places them.
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
  function panelBody() { return document.getElementById("entry-panel-body"); }
  function layout() { return document.getElementById("tree-layout"); }
  function rowOf(entryId) { return document.getElementById("entry-" + entryId); }

  function setMessage(text, css) {
    var p = document.createElement("p");
    p.className = css;
    p.textContent = text;
    panelBody().replaceChildren(p);
  }

  // --- the address --------------------------------------------------------------------

  function addressWith(entryId) {
    var url = new URL(window.location.href);
    if (entryId) url.searchParams.set("focus", entryId); else url.searchParams.delete("focus");
    url.hash = "";
    return url.pathname + url.search;
  }

  function focusInAddress() {
    return new URL(window.location.href).searchParams.get("focus") || "";
  }

  // --- the panel ----------------------------------------------------------------------

  var current = null;

  function openEntry(entryId, options) {
    options = options || {};
    var container = tree();
    if (!container || !entryId) return;
    var url = container.dataset.entryUrl + encodeURIComponent(entryId) + "/";
    document.querySelectorAll(".entry.selected").forEach(function (el) { el.classList.remove("selected"); });
    var row = rowOf(entryId);
    if (row) {
      row.classList.add("selected");
      setCursor(row, false);
      if (options.scroll) row.scrollIntoView({ block: "center" });
    }
    panel().hidden = false;
    layout().classList.add("with-panel");
    if (options.push && current !== entryId) history.pushState({ focus: entryId }, "", addressWith(entryId));
    current = entryId;
    setMessage("Loading entry " + entryId + "…", "loading");
    fetchHtml(url).then(function (html) {
      if (current !== entryId) return;  // another entry was opened meanwhile
      panelBody().innerHTML = html;  // the server's own fragment, escaped there
      panel().scrollTop = 0;
    }).catch(function (error) {
      setMessage("Could not load entry " + entryId + ": " + error.message, "errornote");
    });
  }

  function closePanel(options) {
    if (!panel() || panel().hidden) return;
    panel().hidden = true;
    layout().classList.remove("with-panel");
    panelBody().replaceChildren();
    document.querySelectorAll(".entry.selected").forEach(function (el) { el.classList.remove("selected"); });
    if (options && options.push) history.pushState({ focus: null }, "", addressWith(null));
    current = null;
  }

  window.addEventListener("popstate", function () {
    var entryId = focusInAddress();
    if (!entryId) { closePanel(); return; }
    if (rowOf(entryId)) openEntry(entryId, { scroll: true });
    else window.location.reload();  // the server unfolds the branches down to it
  });

  // --- folded branches and collapsed runs ---------------------------------------------

  function loadBranch(details) {
    if (details.dataset.loaded) return;
    details.dataset.loaded = "1";
    var body = details.querySelector(".branch-body");
    body.innerHTML = '<p class="loading">Loading…</p>';
    fetchHtml(details.dataset.url).then(function (html) { body.innerHTML = html; }).catch(function (error) {
      delete details.dataset.loaded;
      var p = document.createElement("p");
      p.className = "errornote";
      p.textContent = "Could not load this branch: " + error.message;
      body.replaceChildren(p);
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

  // --- clicks ---------------------------------------------------------------------------

  function plainClick(event) {
    return event.button === 0 && !event.ctrlKey && !event.metaKey && !event.shiftKey && !event.altKey;
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.closest("#entry-panel-close")) { closePanel({ push: true }); return; }
    var run = target.closest(".run-expand");
    if (run && run.closest(".run")) { event.preventDefault(); expandRun(run.closest(".run")); return; }
    if (!plainClick(event)) return;  // a new tab or window: the link's own address
    var link = target.closest("[data-entry-link]");
    if (link && tree()) {
      var id = link.getAttribute("data-entry-link");
      event.preventDefault();
      if (rowOf(id)) openEntry(id, { scroll: true, push: true });
      else window.location = tree().dataset.treeUrl + "?focus=" + encodeURIComponent(id);
      return;
    }
    var idLink = target.closest("a.entry-id");
    if (idLink) {
      var idRow = idLink.closest(".entry[data-entry]");
      if (idRow) { event.preventDefault(); openEntry(idRow.dataset.entry, { push: true }); }
      return;
    }
    if (target.closest("a, button, input, select, textarea, summary, form, details.msg-thinking")) return;
    var row = target.closest(".entry[data-entry]");
    if (row && (row.closest("#session-tree") || row.closest("#matches"))) {
      event.preventDefault();
      openEntry(row.dataset.entry, { push: true });
    }
  });

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details.matches && details.matches("details.branch") && details.open) loadBranch(details);
  }, true);

  // --- the keyboard -----------------------------------------------------------------------

  var cursor = null;

  function visibleRows() {
    var container = tree();
    if (!container) return [];
    return Array.prototype.filter.call(container.querySelectorAll(".entry[data-entry]"), function (row) {
      return row.offsetParent !== null;  // not inside a folded branch
    });
  }

  function setCursor(row, focus) {
    if (cursor && cursor !== row) cursor.classList.remove("cursor");
    cursor = row;
    row.classList.add("cursor");
    if (focus) {
      var link = row.querySelector("a.entry-id");
      if (link) link.focus({ preventScroll: true });
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function startRow(rows) {
    if (cursor && rows.indexOf(cursor) >= 0) return cursor;
    var selected = document.querySelector("#session-tree .entry.selected");
    if (selected && rows.indexOf(selected) >= 0) return selected;
    var leaf = document.querySelector("#session-tree .entry.leaf");
    return leaf && rows.indexOf(leaf) >= 0 ? leaf : rows[0];
  }

  function typing(target) {
    return target.closest && target.closest("input, select, textarea, [contenteditable]");
  }

  document.addEventListener("keydown", function (event) {
    if (!tree() || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    if (key === "Escape") { if (panel() && !panel().hidden) { closePanel({ push: true }); event.preventDefault(); } return; }
    if (event.target.closest && event.target.closest("#entry-panel")) return;  // keys in the panel are the panel's
    var rows = visibleRows();
    if (!rows.length) return;
    var row = startRow(rows);
    var index = rows.indexOf(row);
    if (key === "ArrowDown" || key === "j") {
      setCursor(cursor ? rows[Math.min(rows.length - 1, index + 1)] : row, true);
    } else if (key === "ArrowUp" || key === "k") {
      setCursor(cursor ? rows[Math.max(0, index - 1)] : row, true);
    } else if (key === "Enter") {
      // On a link, button or fold, Enter is theirs (the entry's id link opens it through its click).
      if (!cursor || event.target.closest("a, button, summary")) return;
      openEntry(cursor.dataset.entry, { push: true });
    } else if (key === "ArrowLeft" || key === "h" || key === "ArrowRight" || key === "l") {
      var sibling = (key === "ArrowLeft" || key === "h") ? row.dataset.prev : row.dataset.next;
      if (!sibling) return;
      window.location = tree().dataset.lineUrl + encodeURIComponent(sibling) + "&focus=" + encodeURIComponent(sibling);
    } else {
      return;
    }
    event.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var container = tree();
    if (!container) return;
    var focus = container.dataset.focus;
    if (focus && rowOf(focus)) openEntry(focus, { scroll: true });
    else if (location.hash.indexOf("#entry-") === 0 && rowOf(location.hash.slice(7))) {
      openEntry(location.hash.slice(7), { scroll: true });
    }
  });
})();
