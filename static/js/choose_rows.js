// "All rows on this page" on a table with row checkboxes: <input type="checkbox" data-choose-all="issue">
// ticks or clears every checkbox named "issue" in the same form. Listeners sit on the document, so
// tables htmx swaps in later work too; the control stays hidden without JavaScript, where it could do
// nothing. An external file, so the Content-Security-Policy needs no inline script.
document.addEventListener("change", function (event) {
  var box = event.target;
  var name = box.getAttribute && box.getAttribute("data-choose-all");
  if (!name || !box.form) { return; }
  box.form.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (row) {
    row.checked = box.checked;
  });
});

function showChooseLabels() {
  document.querySelectorAll("[data-choose-label][hidden]").forEach(function (label) {
    label.hidden = false;
  });
}
// Loaded async: the page may be parsed already, or not yet.
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", showChooseLabels);
} else {
  showChooseLabels();
}
document.addEventListener("htmx:afterSwap", showChooseLabels);

// "All N issues matching this filter, on every page" marks rows nobody sees on this page: a mark
// sent by mistake would need a hunt through every page to undo, so it is asked once before it goes.
document.addEventListener("htmx:confirm", function (event) {
  // The triage form's own POST only: a sort link inside it (a GET) asks nothing.
  var form = event.target.closest && event.target.closest("form");
  if (!form || form.id !== "triage-form" || String(event.detail.verb).toLowerCase() !== "post") { return; }
  var all = form.querySelector("#choose-all-matching");
  if (!all || !all.checked) { return; }
  var button = event.detail.triggeringEvent && event.detail.triggeringEvent.submitter;
  var what = button ? button.textContent.trim() : "Mark";
  var label = all.closest("label");
  var scope = label ? label.textContent.trim().replace(/\s+/g, " ") : "All issues matching this filter";
  event.preventDefault();
  if (window.confirm("\u201c" + what + "\u201d for " + scope.charAt(0).toLowerCase() + scope.slice(1) + "?")) {
    event.detail.issueRequest(true);
  }
});
