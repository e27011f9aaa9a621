// retest web app: identity, keyboard shortcuts and JSON submits. No framework.
"use strict";
const cookie = (k) => (document.cookie.split("; ").find((c) => c.startsWith(k + "=")) || "").split("=")[1];
function flash(msg) { const f = document.getElementById("flash"); f.textContent = msg; f.style.display = "block"; setTimeout(() => (f.style.display = "none"), 2500); }
async function post(url, body) {
  const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), credentials: "same-origin" });
  if (!r.ok) { const t = await r.json().catch(() => ({ detail: r.statusText })); flash("error: " + (t.detail || r.status)); throw new Error(t.detail); }
  return r.json();
}
const checked = (form, name) => [...form.querySelectorAll(`input[name=${name}]:checked`)].map((i) => i.value);
const all = (form, name) => [...form.querySelectorAll(`input[name=${name}]`)].map((i) => i.value);
const done = (form) => { form.dataset.saved = "1"; flash("saved"); setTimeout(() => location.reload(), 300); };

const handlers = {
  "label-form": (f) => post("/api/label", { stage: f.dataset.stage, class_id: +f.dataset.class, keyword: f.dataset.keyword, shown: all(f, "item"), checked: checked(f, "item") }),
  "task-form": (f) => post("/api/task", { task_id: f.dataset.task, selected_tokens: checked(f, "selected") }),
  "neardup-form": (f) => post("/api/neardup", { candidate_id: f.dataset.candidate, metric: f.dataset.metric, shown: all(f, "duplicate"), duplicates: checked(f, "duplicate"), reviewed: f.querySelector("input[name=reviewed]").checked }),
  "le-form": (f, e) => {
    const verdict = (e.submitter && e.submitter.dataset.verdict) || "unclear";
    return post("/api/label-error", { item_id: f.dataset.item, verdict, new_class: verdict === "wrong" ? +f.querySelector("select[name=new_class]").value : null });
  },
  "review-form": (f) => {
    const boxes = [...f.querySelectorAll("input[name=blacklist]")];
    const sets = {};
    f.querySelectorAll("input.ndset").forEach((i) => { const k = i.value.trim(); if (k) (sets[k] = sets[k] || []).push(i.dataset.item); });
    return post("/api/review", {
      revision: f.dataset.revision, class_id: +f.dataset.class, reason: f.querySelector("input[name=reason]").value,
      blacklist: boxes.filter((b) => b.checked && b.dataset.was === "0").map((b) => b.value),
      unblacklist: boxes.filter((b) => !b.checked && b.dataset.was === "1").map((b) => b.value),
      near_duplicate_sets: Object.values(sets).filter((s) => s.length >= 2),
      reviewed: f.querySelector("input[name=reviewed]").checked, problematic: f.querySelector("input[name=problematic]").checked,
    });
  },
};

document.addEventListener("DOMContentLoaded", () => {
  const who = cookie("retest_annotator");
  document.getElementById("who").textContent = who ? "annotator: " + decodeURIComponent(who) : "not signed in";
  const params = new URLSearchParams(location.search);
  const idf = document.getElementById("identity-form");
  if (idf) {
    if (params.get("token")) idf.token.value = params.get("token");
    if (who) idf.name.value = decodeURIComponent(who);
    idf.addEventListener("submit", (e) => {
      e.preventDefault();
      document.cookie = "retest_annotator=" + encodeURIComponent(idf.name.value.trim()) + "; path=/; SameSite=Strict";
      document.cookie = "retest_token=" + encodeURIComponent(idf.token.value.trim()) + "; path=/; SameSite=Strict";
      location.reload();
    });
  }
  for (const [cls, fn] of Object.entries(handlers)) {
    document.querySelectorAll("form." + cls).forEach((f) => f.addEventListener("submit", (e) => { e.preventDefault(); fn(f, e).then(() => done(f)); }));
  }
  const search = document.getElementById("search");
  if (search) search.addEventListener("change", () => {
    const opt = [...document.querySelectorAll("#class-list option")].find((o) => o.value === search.value || o.textContent.includes(search.value));
    if (opt) location.pathname = location.pathname.replace(/\/\d+$/, "/" + opt.dataset.id);
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" && e.target.type !== "checkbox") return;
    const form = document.querySelector("form.label-form, form.task-form");
    if (!form) return;
    const boxes = form.querySelectorAll("input[type=checkbox]");
    if (e.key === "a") boxes.forEach((b) => (b.checked = true));
    if (e.key === "n") boxes.forEach((b) => (b.checked = false));
    if (e.key === "Enter") form.requestSubmit();
  });
});
