/**
 * `/assets/webauthn.js`: the one script the pages run (issue 11), for the WebAuthn ceremonies
 * only; every form still posts as a plain form. It is @simplewebauthn/browser's UMD bundle
 * (MIT, its banner kept) followed by the small client below, read once at start-up.
 *
 * The client handles every `<form data-passkey data-options="…">`: on submit it posts the form's
 * fields to `data-options` (same origin, CSRF token included), runs the ceremonies the answer
 * asks for (`assertion`, then `registration`), puts their JSON in hidden fields of the same names
 * and submits the form. The server verifies everything; this script decides nothing.
 *
 * A form with `data-unfold-first` (the per-call approval) first opens every folded value still
 * closed on the page (`details[data-folded]`), and asks to read them before its ceremony starts:
 * the passkey confirms what the page shows, a long value's tail included.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** Where pages load it from; the CSP of those pages allows exactly this origin's scripts. */
export const WEBAUTHN_SCRIPT_PATH = '/assets/webauthn.js';

const CLIENT = String.raw`
(function () {
  'use strict';
  var lib = window.SimpleWebAuthnBrowser;
  var status = document.getElementById('passkey-status');
  function say(text) {
    if (status) status.textContent = text;
  }
  function setField(form, name, value) {
    var input = form.querySelector('input[type=hidden][name="' + name + '"]');
    if (!input) {
      input = document.createElement('input');
      input.type = 'hidden';
      input.name = name;
      form.appendChild(input);
    }
    input.value = value;
  }
  // A marker names a form rendered elsewhere (the approve form) that needs the passkey prompt.
  Array.prototype.forEach.call(document.querySelectorAll('[data-passkey-for]'), function (marker) {
    var target = document.getElementById(marker.getAttribute('data-passkey-for'));
    if (!target) return;
    target.setAttribute('data-passkey', 'assert');
    target.setAttribute('data-options', marker.getAttribute('data-options'));
    target.setAttribute('data-waiting', marker.getAttribute('data-waiting') || '');
  });
  var forms = document.querySelectorAll('form[data-passkey]');
  Array.prototype.forEach.call(forms, function (form) {
    if (!lib || !lib.browserSupportsWebAuthn()) {
      if (form.hasAttribute('data-reveal')) return;
      say('This browser cannot use passkeys here.');
      return;
    }
    if (form.hasAttribute('data-reveal')) form.hidden = false;
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      if (form.hasAttribute('data-unfold-first')) {
        var folded = document.querySelectorAll('details[data-folded]:not([open])');
        if (folded.length > 0) {
          Array.prototype.forEach.call(folded, function (d) { d.open = true; });
          folded[0].scrollIntoView({ block: 'center' });
          folded[0].querySelector('summary').focus();
          say('Every long value is now shown in full. Read them, then approve again.');
          return;
        }
      }
      var buttons = form.querySelectorAll('button');
      Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
      say(form.getAttribute('data-waiting') || 'Waiting for your passkey…');
      var body = new URLSearchParams(new FormData(form));
      fetch(form.getAttribute('data-options'), { method: 'POST', body: body, credentials: 'same-origin' })
        .then(function (res) {
          return res.json().then(function (json) {
            if (!res.ok) throw new Error(json && json.message ? json.message : 'The passkey could not be started.');
            return json;
          });
        })
        .then(function (options) {
          var steps = Promise.resolve();
          if (options.assertion) {
            steps = steps.then(function () {
              return lib.startAuthentication({ optionsJSON: options.assertion }).then(function (answer) {
                setField(form, 'assertion', JSON.stringify(answer));
              });
            });
          }
          if (options.registration) {
            steps = steps.then(function () {
              return lib.startRegistration({ optionsJSON: options.registration }).then(function (answer) {
                setField(form, 'registration', JSON.stringify(answer));
              });
            });
          }
          return steps.then(function () { return Boolean(options.assertion || options.registration); });
        })
        .then(function (prompted) {
          // No ceremony when the server asked for none (e.g. only read-only capabilities approved).
          say(prompted ? 'Passkey confirmed; sending…' : 'Sending…');
          form.submit();
        })
        .catch(function (err) {
          say('Your passkey was not used, so nothing was changed. ' + (err && err.message ? err.message : String(err)));
          Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
        });
    });
  });
})();
`;

/** The script's text: the library bundle, then the client. Throws at start-up if it is missing. */
export function webauthnScript(): string {
  const require = createRequire(import.meta.url);
  // The package exports no file paths; its CommonJS entry sits next to dist/.
  const entry = require.resolve('@simplewebauthn/browser');
  const bundle = readFileSync(join(dirname(entry), '..', 'dist', 'bundle', 'index.umd.min.js'), 'utf8');
  return `${bundle}\n${CLIENT}`;
}
