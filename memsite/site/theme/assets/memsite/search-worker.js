/*
 * memsite's search worker: Material for MkDocs' search interface (the header box,
 * its keyboard shortcuts, the result list, dark mode) over a Pagefind index.
 *
 * Material talks to its search worker with four messages (SETUP, READY, QUERY,
 * RESULT: Material's integrations/search/worker/message) and lets a site bring
 * its own worker. This one answers with Pagefind, which fetches the chunk of
 * the index a query needs and the small fragments of the results shown, instead
 * of one JSON index of the whole site.
 *
 * Everything shown is escaped here: Material puts a result's title and text in
 * the page as HTML, and memory text is written by agents.
 */
const SETUP = 0, READY = 1, QUERY = 2, RESULT = 3
const SHOWN = 20      // results fetched and listed for one query
const AROUND = 14     // words of text shown on each side of the first match

let pagefind = null
let latest = 0        // the newest query: an older one still running is dropped

const escape = text => String(text).replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`)

/* A snippet of the result's text with the matched words marked, built from the
   plain text Pagefind returns (its own excerpt leaves some markup characters raw). */
function snippet(data) {
  const words = data.content.split(/\s+/)
  const marked = new Set(data.locations)
  const titled = (data.meta.title || "").split(/\s+/).filter(Boolean).length  // shown as the heading already
  const after = data.locations.filter(n => n >= titled)
  const first = after.length ? Math.min(...after) : titled
  const start = Math.max(Math.min(titled, words.length - 1), first - AROUND)
  const end = Math.min(words.length, first + AROUND + 1)
  const shown = []
  for (let n = start; n < end; n++) {
    const word = escape(words[n].length > 60 ? words[n].slice(0, 60) + "…" : words[n])
    shown.push(marked.has(n) ? `<mark>${word}</mark>` : word)
  }
  return (start > titled ? "… " : "") + shown.join(" ") + (end < words.length ? " …" : "")
}

async function setup() {
  pagefind = await import(new URL("../../pagefind/pagefind.js", self.location.href).href)
  await pagefind.options({ baseUrl: "/", excerptLength: 2 * AROUND })
  await pagefind.init()
  self.postMessage({ type: READY })
}

/* The pages holding every word; when none does, the pages holding some of them,
   those holding more words first, then by Pagefind's score (Pagefind itself only
   answers pages holding all the words). */
async function find(words) {
  const found = await pagefind.search(words)
  const each = words.split(/\s+/)
  if (found.results.length || each.length < 2)
    return found.results
  const merged = new Map()
  for (const part of await Promise.all(each.map(word => pagefind.search(word))))
    for (const result of part.results) {
      const seen = merged.get(result.id) || { result, words: 0, score: 0 }
      seen.words += 1
      seen.score += result.score
      merged.set(result.id, seen)
    }
  return [...merged.values()].sort((a, b) => b.words - a.words || b.score - a.score).map(m => m.result)
}

async function query(value, number) {
  const words = value.trim()
  const results = words ? await find(words) : []
  const data = await Promise.all(results.slice(0, SHOWN).map(result => result.data()))
  if (number !== latest)
    return
  const terms = Object.fromEntries(words.toLowerCase().split(/\s+/).filter(Boolean).map(w => [w, true]))
  const items = data.map((page, n) => [{
    location: page.url.replace(/^\//, ""),   // relative to the site's base, wherever it is served
    title: escape(page.meta.title || page.url),
    text: `<p>${snippet(page)}</p>`,
    tags: page.meta.category ? [escape(page.meta.category)] : undefined,
    score: SHOWN - n,
    terms
  }])
  self.postMessage({ type: RESULT, data: { items, count: results.length } })
}

self.addEventListener("message", event => {
  const { type, data } = event.data
  if (type === SETUP)
    setup().catch(error => console.error("memsite search:", error))
  else if (type === QUERY)
    query(data, ++latest).catch(error => console.error("memsite search:", error))
})
