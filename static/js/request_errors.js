// htmx swaps only 2xx answers and says nothing about the others, so a triage click refused
// for a stale CSRF token, a server error or a filter on an audit deleted meanwhile would
// otherwise do nothing visible. This says what happened. On 403 (the token rotated: logged
// in again, perhaps in another tab) and 404 (gone meanwhile) the page is stale, so it is
// reloaded and the message shown after the reload; once only, so a page that answers so
// every time does not reload forever. An external file, so the Content-Security-Policy
// needs no inline script.
(function () {
  var KEY = "siteward:request-error";
  var SHOW_WITHIN_MS = 30000; // a message kept for a reload that never came is dropped after this
  var failed = null; // the element whose request failed: its next success clears the message

  function say(text) {
    var box = document.getElementById("request-error");
    if (!box) {
      box = document.createElement("div");
      box.id = "request-error";
      box.className = "request-error";
      box.setAttribute("role", "alert");
      var message = document.createElement("p");
      var dismiss = document.createElement("button");
      dismiss.type = "button";
      dismiss.className = "secondary";
      dismiss.textContent = "Dismiss";
      dismiss.addEventListener("click", function () { box.remove(); });
      box.append(message, dismiss);
      (document.getElementById("content") || document.body).prepend(box);
    }
    box.querySelector("p").textContent = text;
  }

  function stored() {
    try {
      var entry = JSON.parse(sessionStorage.getItem(KEY) || "null");
      return entry && entry.url === location.href && Date.now() - entry.at < SHOW_WITHIN_MS ? entry : null;
    } catch (error) {
      return null; // storage refused (private mode) or garbled: nothing to show
    }
  }

  function reloadSaying(text) {
    if (stored()) { // this page was reloaded for the same reason moments ago: say so instead of looping
      say(text + " Reloading did not help: reload the page yourself, or log in again.");
      return;
    }
    try {
      sessionStorage.setItem(KEY, JSON.stringify({url: location.href, at: Date.now(), text: text}));
    } catch (error) {
      // Without storage the message is lost in the reload; the fresh page is still the recovery.
    }
    location.reload();
  }

  function explain(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    var body = (xhr.responseText || "").trim();
    if (xhr.status >= 500) {
      return "The server failed to do that (error " + xhr.status + "): nothing was changed on this page. " +
        "Try again in a moment; if it keeps failing, reload the page.";
    }
    // Our own refusals (a bad request, a limit) answer a short plain-text reason: show it.
    if (type.indexOf("text/plain") === 0 && body && body.length <= 300) {
      return body;
    }
    return "The server refused that (error " + xhr.status + "). Reload the page and try again.";
  }

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    failed = event.detail.elt;
    if (status === 403) {
      reloadSaying("This page was out of date (you may have logged in again, perhaps in another tab), so it " +
                   "was reloaded and nothing was changed: please do that again.");
    } else if (status === 404) {
      reloadSaying("What this page showed is gone (deleted meanwhile?), so the page was reloaded.");
    } else {
      say(explain(event.detail.xhr));
    }
  });

  document.addEventListener("htmx:sendError", function (event) {
    failed = event.detail.elt;
    say("The server could not be reached: check the connection and try again.");
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var box = document.getElementById("request-error");
    if (box && event.detail.successful && event.detail.elt === failed) {
      box.remove(); // a poll that failed once and answers again: the message is out of date
      failed = null;
    }
  });

  function showStored() {
    var entry = stored();
    if (entry && !entry.shown) {
      say(entry.text);
      entry.shown = true; // kept until it expires: reloadSaying reads it to reload only once
      sessionStorage.setItem(KEY, JSON.stringify(entry));
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showStored);
  } else {
    showStored();
  }
})();
