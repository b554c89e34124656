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
  // Heatmaps of large clusters: one byte per ordered pair (see render/html/heatmap.rs).
  document.querySelectorAll('canvas.heatmap').forEach(function (c) {
    var n = parseInt(c.getAttribute('data-n'), 10);
    var raw = atob(c.getAttribute('data-cells') || '');
    var ctx = c.getContext('2d');
    if (!ctx || !(n > 0) || raw.length !== n * n) { return; }
    var img = ctx.createImageData(n, n);
    var d = img.data;
    var drawn = 0;
    for (var i = 0; i < raw.length; i++) {
      var v = raw.charCodeAt(i);
      var r = 241, g = 245, b = 249;
      if (v === 1) { r = 220; g = 38; b = 38; }
      else if (v === 2) { r = 249; g = 115; b = 22; }
      else if (v === 3) { r = 127; g = 29; b = 29; }
      else if (v >= 16) {
        var t = (v - 16) / 239;
        r = Math.round(220 - 180 * t); g = Math.round(240 - 90 * t); b = Math.round(150 - 90 * t);
      }
      if (v !== 0) { drawn++; }
      d[4 * i] = r; d[4 * i + 1] = g; d[4 * i + 2] = b; d[4 * i + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    c.setAttribute('data-drawn', String(drawn));
  });
  document.documentElement.setAttribute('data-ready', '1');
})();
