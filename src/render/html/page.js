(function () {
  'use strict';
  // Reads the page only: report text is never written back as markup.
  function fallbackCopy(text) {
    var ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
    document.body.removeChild(ta);
    return ok;
  }
  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () { return true; },
        function () { return fallbackCopy(text); });
    }
    return Promise.resolve(fallbackCopy(text));
  }
  document.querySelectorAll('pre.cmd').forEach(function (pre) {
    var b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy';
    b.textContent = 'Copy';
    b.title = 'Copy this command';
    b.addEventListener('click', function () {
      copy(pre.textContent).then(function (ok) {
        b.textContent = ok ? 'Copied' : 'Select and copy';
        setTimeout(function () { b.textContent = 'Copy'; }, 1500);
      });
    });
    pre.parentNode.appendChild(b);
  });
  var all = document.getElementById('show-all');
  var findings = document.getElementById('findings');
  if (all && findings) {
    all.addEventListener('change', function () { findings.classList.toggle('all', all.checked); });
  }
  document.documentElement.setAttribute('data-ready', '1');
})();
