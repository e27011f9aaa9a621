// retest web app: keyboard-first labeling and JSON submits. No framework.
// Every form carries the submission key of this page load: the server stores a
// write once however often it arrives (double click, Enter held, a resend).
"use strict";
function flash(msg) { const f = document.getElementById("flash"); f.textContent = msg; f.style.display = "block"; clearTimeout(flash.t); flash.t = setTimeout(() => (f.style.display = "none"), 2500); }
async function post(url, body) {
  const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), credentials: "same-origin" });
  if (!r.ok) { const t = await r.json().catch(() => ({ detail: r.statusText })); const d = typeof t.detail === "string" ? t.detail : JSON.stringify(t.detail); flash("error: " + (d || r.status)); throw new Error(d); }
  return r.json();
}
const checked = (form, name) => [...form.querySelectorAll(`input[name=${name}]:checked`)].map((i) => i.value);
const all = (form, name) => [...form.querySelectorAll(`input[name=${name}]`)].map((i) => i.value);

const handlers = {
  "label-form": (f) => post("/api/label", { submission: f.dataset.submission, stage: f.dataset.stage, class_id: +f.dataset.class, keyword: f.dataset.keyword, shown: all(f, "item"), checked: checked(f, "item") }),
  "task-form": (f) => post("/api/task", { submission: f.dataset.submission, task_id: f.dataset.task, selected_tokens: checked(f, "selected") }),
  "neardup-form": (f) => post("/api/neardup", { submission: f.closest("[data-submission]").dataset.submission + "-" + f.dataset.row, candidate_id: f.dataset.candidate, metric: f.dataset.metric, shown: all(f, "duplicate"), duplicates: checked(f, "duplicate"), reviewed: f.querySelector("input[name=reviewed]").checked }),
  "le-form": (f, e) => {
    const verdict = (e.submitter && e.submitter.dataset.verdict) || "unclear";
    return post("/api/label-error", { submission: f.dataset.submission, item_id: f.dataset.item, verdict, new_class: verdict === "wrong" ? +f.querySelector("select[name=new_class]").value : null });
  },
  "exclusion-form": (f) => post("/api/exclusion", { submission: f.dataset.submission, worker: f.dataset.worker, exclude: f.dataset.exclude === "1" }),
  "review-form": (f) => {
    const boxes = [...f.querySelectorAll("input[name=blacklist]")];
    const sets = {};
    f.querySelectorAll("input.ndset").forEach((i) => { const k = i.value.trim(); if (k) (sets[k] = sets[k] || []).push(i.dataset.item); });
    return post("/api/review", {
      submission: f.dataset.submission + "-" + (f.dataset.saves = (+f.dataset.saves || 0) + 1),
      revision: f.dataset.revision, class_id: +f.dataset.class, reason: f.querySelector("input[name=reason]").value,
      blacklist: boxes.filter((b) => b.checked && b.dataset.was === "0").map((b) => b.value),
      unblacklist: boxes.filter((b) => !b.checked && b.dataset.was === "1").map((b) => b.value),
      near_duplicate_sets: Object.values(sets).filter((s) => s.length >= 2),
      reviewed: f.querySelector("input[name=reviewed]").checked, problematic: f.querySelector("input[name=problematic]").checked,
    });
  },
};

// what happens after a successful save: labeling goes on to the next batch,
// keyword or task; review pages keep what is on screen
const after = {
  "label-form": (f) => (location.href = f.dataset.next),
  "task-form": (f) => (location.href = f.dataset.next),
  "le-form": () => setTimeout(() => location.reload(), 200),
  "exclusion-form": () => setTimeout(() => location.reload(), 200),
  "neardup-form": (f) => { f.classList.add("saved"); f.dataset.saved = "1"; },
  "review-form": (f) => {
    f.querySelectorAll("input[name=blacklist]").forEach((b) => (b.dataset.was = b.checked ? "1" : "0"));
    f.querySelectorAll("input.ndset").forEach((i) => (i.dataset.was = i.value));
  },
};

function submitOnce(f, cls, e) {
  // one request per page load: further submits while (or after) sending do nothing
  if (f.dataset.sending === "1") return;
  f.dataset.sending = "1";
  f.classList.add("sending");
  const fs = f.querySelector("fieldset");
  const btns = [...f.querySelectorAll("button")];
  btns.forEach((b) => (b.disabled = true));
  if (fs) fs.disabled = true;
  const done = (ok) => {
    const again = !ok || cls === "neardup-form" || cls === "review-form" || cls === "le-form" || cls === "exclusion-form";
    if (again) { f.dataset.sending = ""; f.classList.remove("sending"); btns.forEach((b) => (b.disabled = false)); if (fs) fs.disabled = false; }
  };
  handlers[cls](f, e).then((r) => {
    const said = r.replayed ? "already saved" : r.updated ? "updated" : "saved";
    // pages that move on show it on the next page
    if (f.dataset.next) sessionStorage.setItem("retest-flash", said); else flash(said);
    done(true); after[cls](f);
  }, () => done(false));
}

// -- keyboard: a roving focus over the cells of the grid
function cellsOf(root) { return [...root.querySelectorAll(".cell")]; }
function focusCell(cells, i) {
  if (!cells.length) return;
  i = Math.max(0, Math.min(cells.length - 1, i));
  cells.forEach((c, k) => (c.tabIndex = k === i ? 0 : -1));
  cells[i].focus({ preventScroll: false });
  cells[i].scrollIntoView({ block: "nearest" });
}
function rowStep(cells, i, dir) {
  // the cell straight above/below: same column by position, next/previous row
  const r = cells[i].getBoundingClientRect();
  let best = -1, bestDist = Infinity;
  cells.forEach((c, k) => {
    const q = c.getBoundingClientRect();
    if (dir > 0 ? q.top <= r.top + 2 : q.top >= r.top - 2) return;
    const dy = Math.abs(q.top - r.top), dx = Math.abs(q.left - r.left);
    const d = dy * 10000 + dx;
    if (d < bestDist) { bestDist = d; best = k; }
  });
  return best < 0 ? i : best;
}
function zoom(cell) {
  let z = document.getElementById("zoom");
  if (!z) { z = document.createElement("div"); z.id = "zoom"; z.innerHTML = "<img alt=''>"; z.addEventListener("click", () => z.classList.remove("on")); document.body.appendChild(z); }
  if (z.classList.contains("on") || !cell) { z.classList.remove("on"); return; }
  const src = cell.querySelector("img");
  const img = z.querySelector("img");
  img.onload = () => {
    // original pixels, scaled up by a whole factor so edges stay crisp
    const k = Math.max(1, Math.floor(Math.min(innerWidth * 0.9 / img.naturalWidth, innerHeight * 0.9 / img.naturalHeight)));
    img.style.width = img.naturalWidth * k + "px"; img.style.height = img.naturalHeight * k + "px";
  };
  img.src = src.src;
  z.classList.add("on");
}
function updateCount(form) {
  const n = document.getElementById("n-checked");
  if (n) n.textContent = form.querySelectorAll("input[type=checkbox]:checked").length;
}

function gridKeys(form) {
  const cells = cellsOf(form);
  const at = () => Math.max(0, cells.indexOf(document.activeElement.closest(".cell")));
  form.addEventListener("change", () => updateCount(form));
  cells.forEach((c, k) => c.addEventListener("focus", () => cells.forEach((o, j) => (o.tabIndex = j === k ? 0 : -1))));
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target.tagName === "INPUT" && e.target.type !== "checkbox") return;
    const zoomed = document.getElementById("zoom");
    if (zoomed && zoomed.classList.contains("on") && (e.key === "Escape" || e.key === "z")) { e.preventDefault(); zoom(null); return; }
    const i = at();
    const box = cells[i] && cells[i].querySelector("input[type=checkbox]");
    switch (e.key) {
      case "ArrowRight": focusCell(cells, i + 1); break;
      case "ArrowLeft": focusCell(cells, i - 1); break;
      case "ArrowDown": focusCell(cells, rowStep(cells, i, 1)); break;
      case "ArrowUp": focusCell(cells, rowStep(cells, i, -1)); break;
      case " ":
        if (e.target === box) return; // the checkbox itself: its own toggle
        if (box) { box.checked = !box.checked; updateCount(form); }
        break;
      case "z": zoom(cells[i]); break;
      case "a": cells.forEach((c) => (c.querySelector("input").checked = true)); updateCount(form); break;
      case "n": cells.forEach((c) => (c.querySelector("input").checked = false)); updateCount(form); break;
      case "Enter": form.requestSubmit(); break;
      default: return;
    }
    e.preventDefault();
  });
  updateCount(form);
  if (cells.length) focusCell(cells, 0);
}

function pairKeys(list) {
  // y/n decide the focused pair; a row is saved once each of its pairs is decided
  const cells = [...list.querySelectorAll(".pair")];
  const at = () => Math.max(0, cells.indexOf(document.activeElement.closest(".pair")));
  const decide = (i, yes) => {
    const c = cells[i];
    c.querySelector("input[name=duplicate]").checked = yes;
    c.classList.toggle("yes", yes); c.classList.toggle("no", !yes); c.dataset.decided = "1";
    const f = c.closest("form");
    if (f.dataset.saved !== "1" && [...f.querySelectorAll(".pair")].every((p) => p.dataset.decided === "1")) submitOnce(f, "neardup-form");
    focusCell(cells, i + 1);
  };
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || (e.target.tagName === "INPUT" && e.target.type !== "checkbox")) return;
    const zoomed = document.getElementById("zoom");
    if (zoomed && zoomed.classList.contains("on") && (e.key === "Escape" || e.key === "z")) { e.preventDefault(); zoom(null); return; }
    const i = at();
    switch (e.key) {
      case "y": decide(i, true); break;
      case "n": decide(i, false); break;
      case "ArrowRight": case "ArrowDown": case "j": focusCell(cells, i + 1); break;
      case "ArrowLeft": case "ArrowUp": case "k": focusCell(cells, i - 1); break;
      case "z": zoom(cells[i]); break;
      default: return;
    }
    e.preventDefault();
  });
  if (cells.length) focusCell(cells, 0);
}

// a page restored from the back-forward cache would resend its old key: load it anew
window.addEventListener("pageshow", (e) => { if (e.persisted) location.reload(); });

function undo(btn) {
  if (btn.disabled) return;
  btn.disabled = true;
  post("/api/undo", { submission: btn.dataset.submission }).then((r) => {
    sessionStorage.setItem("retest-flash", "undone");
    location.href = "/task/" + encodeURIComponent(r.task_id);
  }, () => (btn.disabled = false));
}

document.addEventListener("DOMContentLoaded", () => {
  const said = sessionStorage.getItem("retest-flash");
  if (said) { sessionStorage.removeItem("retest-flash"); flash(said); }
  const u = document.getElementById("undo");
  if (u) u.addEventListener("click", () => undo(u));
  for (const cls of Object.keys(handlers)) {
    document.querySelectorAll("form." + cls).forEach((f) => f.addEventListener("submit", (e) => { e.preventDefault(); submitOnce(f, cls, e); }));
  }
  const grid = document.querySelector("form.keyed");
  if (grid) gridKeys(grid);
  const pairs = document.querySelector(".nd-list");
  if (pairs) pairKeys(pairs);
  const search = document.getElementById("search");
  if (search) search.addEventListener("change", () => {
    const opt = [...document.querySelectorAll("#class-list option")].find((o) => o.value === search.value || o.textContent.includes(search.value));
    if (opt) location.pathname = location.pathname.replace(/\/\d+$/, "/" + opt.dataset.id);
  });
});
