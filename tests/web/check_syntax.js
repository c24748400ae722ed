// Syntax check of the browser files, without running them: web/anteroom.js, and every inline
// <script> of the web/*.html pages (with the template placeholders filled as the server fills
// them). Also refuses external URLs in src/href attributes and CSS, since the pages must work
// with nothing but the anteroom server. Usage: node tests/web/check_syntax.js [WEB_DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const webDir = process.argv[2] || path.join(__dirname, '..', '..', 'web');
let failures = 0;

function compile(code, filename) {
  try {
    new vm.Script(code, { filename });  // parses only; nothing runs
  } catch (err) {
    failures++;
    console.error(`${filename}: ${err.message}\n${err.stack.split('\n').slice(0, 3).join('\n')}`);
  }
}

function checkNoExternalUrls(text, filename) {
  const external = /(?:\b(?:src|href|action)\s*=\s*["']?|url\(\s*["']?|@import\s+["'])(?:https?:)?\/\//gi;
  for (const match of text.matchAll(external)) {
    failures++;
    console.error(`${filename}: external URL at offset ${match.index}: ${match[0]}`);
  }
}

let scripts = 0;
for (const name of fs.readdirSync(webDir).sort()) {
  const file = path.join(webDir, name);
  if (name === 'i18n') {
    // The waiting page's translations: JSON with the same keys in every language.
    const keys = (lang) => Object.keys(JSON.parse(fs.readFileSync(path.join(file, `${lang}.json`), 'utf8'))).sort().join();
    for (const lang of fs.readdirSync(file)) {
      if (keys(lang.replace(/\.json$/, '')) !== keys('en')) {
        failures++;
        console.error(`${file}/${lang}: not the keys of en.json`);
      }
    }
    continue;
  }
  const text = fs.readFileSync(file, 'utf8');
  if (name.endsWith('.js')) {
    compile(text, file);
    scripts++;
  } else if (name.endsWith('.html')) {
    checkNoExternalUrls(text, file);
    const page = text.replaceAll('{{room_json}}', '"a.b:c-d"').replaceAll('{{room}}', 'a.b:c-d')
      .replaceAll('{{base_json}}', '"/anteroom"').replaceAll('{{base}}', '/anteroom')
      // The waiting page's other JSON placeholders (server/page_template.h), then its text.
      .replace(/\{\{\w+_json\}\}/g, '{}').replace(/\{\{[\w.]+\}\}/g, 'x');
    let index = 0;
    for (const match of page.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script\s*>/gi)) {
      if (/\bsrc\s*=/i.test(match[1])) continue;
      compile(match[2], `${file} (inline script ${++index})`);
      scripts++;
    }
  }
}
if (failures) {
  console.error(`${failures} problem(s)`);
  process.exit(1);
}
console.log(`ok: ${scripts} scripts parse`);
