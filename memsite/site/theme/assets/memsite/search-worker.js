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

let main = null       // the index of the whole site as an earlier build wrote it
let fresh = null      // the pages new or changed since (none: null)
let stale = new Set() // pages the main index holds in an older form, or that are gone: its answers for them are dropped
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

/* One Pagefind index (its own copy of pagefind.js: a module of its own). */
async function load(folder) {
  const index = await import(new URL(`../../${folder}/pagefind.js`, self.location.href).href)
  await index.options({ baseUrl: "/", excerptLength: 2 * AROUND })
  await index.init()
  return index
}

async function setup() {
  const response = await fetch(new URL("../../pagefind-delta/memsite.json", self.location.href))
  const delta = response.ok ? await response.json() : { stale: [], indexed: 0 }
  stale = new Set(delta.stale)
  ;[main, fresh] = await Promise.all([load("pagefind"), delta.indexed ? load("pagefind-delta") : null])
  self.postMessage({ type: READY })
}

/* Both indexes' answers, best score first, each marked with the index it came from. */
async function search(words) {
  const [old, recent] = await Promise.all([main.search(words), fresh ? fresh.search(words) : { results: [] }])
  return [...old.results.map(result => ({ result, main: true })), ...recent.results.map(result => ({ result, main: false }))]
    .sort((a, b) => b.result.score - a.result.score)
}

/* The pages holding every word; when none does, the pages holding some of them,
   those holding more words first, then by Pagefind's score (Pagefind itself only
   answers pages holding all the words). */
async function find(words) {
  const found = await search(words)
  const each = words.split(/\s+/)
  if (found.length || each.length < 2)
    return found
  const merged = new Map()
  for (const part of await Promise.all(each.map(word => search(word))))
    for (const hit of part) {
      const key = `${hit.main}:${hit.result.id}`
      const seen = merged.get(key) || { hit, words: 0, score: 0 }
      seen.words += 1
      seen.score += hit.result.score
      merged.set(key, seen)
    }
  return [...merged.values()].sort((a, b) => b.words - a.words || b.score - a.score).map(m => m.hit)
}

/* The first SHOWN pages found, less the main index's answers for stale pages (known once their fragment is read). */
async function shown(hits) {
  const data = []
  let dropped = 0
  for (let n = 0; n < hits.length && data.length < SHOWN; n += SHOWN) {
    const batch = await Promise.all(hits.slice(n, n + SHOWN).map(async hit => [hit, await hit.result.data()]))
    for (const [hit, page] of batch)
      if (hit.main && stale.has(page.url))
        dropped += 1
      else if (data.length < SHOWN)
        data.push(page)
  }
  return [data, dropped]
}

async function query(value, number) {
  const words = value.trim()
  const results = words ? await find(words) : []
  const [data, dropped] = await shown(results)
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
  self.postMessage({ type: RESULT, data: { items, count: results.length - dropped } })
}

self.addEventListener("message", event => {
  const { type, data } = event.data
  if (type === SETUP)
    setup().catch(error => console.error("memsite search:", error))
  else if (type === QUERY)
    query(data, ++latest).catch(error => console.error("memsite search:", error))
})
