// Flash messages are said once. htmx keeps a copy of the page to put back on Back, and the
// browser's back-forward cache keeps the page itself: either would show a message again that
// was already read. So a message leaves the page before htmx takes its copy (a filter or a
// page link that pushes a new URL), and when the browser brings a page back from its cache.
// An external file, so the Content-Security-Policy needs no inline script.
(function () {
  function dropMessages() {
    document.querySelectorAll("ul.messages[data-flash]").forEach(function (list) { list.remove(); });
  }
  document.addEventListener("htmx:beforeHistorySave", dropMessages);
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) {
      dropMessages();
    }
  });
})();
