/*
 * memsite's search box where the generator brings no Material search box (Zensical):
 * it sends the words typed to memsite's search worker (search-worker.js, the same
 * worker and messages Material's box uses) and lists what it answers. The worker
 * escapes every title, text and tag it returns (memory text is written by agents).
 */
(() => {
  const SETUP = 0, READY = 1, QUERY = 2, RESULT = 3
  const script = document.currentScript
  const base = new URL("../../", script.src)
  const box = document.querySelector(".memsite-search")
  const toggle = document.getElementById("__search")
  if (!box || !toggle)
    return
  const input = box.querySelector("input")
  const output = box.querySelector(".md-search__output")
  const meta = output.querySelector(".md-search-result__meta")
  const list = output.querySelector(".md-search-result__list")
  const worker = new Worker(new URL("search-worker.js", script.src))
  let ready = false

  const ask = () => {
    if (!ready)
      return
    output.hidden = !input.value.trim()
    worker.postMessage({ type: QUERY, data: input.value })
  }
  worker.addEventListener("message", event => {
    const { type, data } = event.data
    if (type === READY) {
      ready = true
      ask()
    } else if (type === RESULT) {
      meta.textContent = data.count ? `${data.count} matching ${data.count === 1 ? "page" : "pages"}`
                                    : "No matching pages"
      list.innerHTML = data.items.map(([item]) =>
        `<li class="md-search-result__item"><a href="${new URL(item.location, base).href}" ` +
        `class="md-search-result__link"><article class="md-search-result__article"><h1>${item.title}</h1>` +
        `${item.text}${(item.tags || []).map(tag => `<span class="md-tag">${tag}</span>`).join(" ")}` +
        `</article></a></li>`).join("")
    }
  })
  worker.postMessage({ type: SETUP, data: {} })

  toggle.addEventListener("change", () => { if (toggle.checked) input.focus() })
  input.addEventListener("input", ask)
  input.addEventListener("keydown", event => {
    const first = list.querySelector("a")
    if (event.key === "Enter" && first)
      location.href = first.href
    else if (event.key === "Escape")
      toggle.checked = false
  })
  document.addEventListener("keydown", event => {
    const typing = event.target.closest && event.target.closest("input, textarea, [contenteditable]")
    if (event.key === "/" && !typing) {
      event.preventDefault()
      toggle.checked = true
      input.focus()
    }
  })
})()
