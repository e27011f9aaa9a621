"""The SQL schema of ``retest.db``, as migrations applied in order."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]


_V1 = """
CREATE TABLE classes(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '', links TEXT NOT NULL DEFAULT '[]');
CREATE TABLE keywords(
  class_id INTEGER NOT NULL, keyword TEXT NOT NULL,
  original_count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(class_id, keyword));
CREATE TABLE refs(
  split TEXT NOT NULL, idx INTEGER NOT NULL, class_id INTEGER NOT NULL,
  content_id TEXT NOT NULL, keyword TEXT, array_name TEXT, array_row INTEGER,
  PRIMARY KEY(split, idx));
CREATE INDEX refs_content ON refs(content_id);
CREATE TABLE candidates(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
  source_ref TEXT NOT NULL, class_id INTEGER, keyword TEXT, date_taken TEXT,
  date_uploaded TEXT, url TEXT, license TEXT, width INTEGER, height INTEGER,
  array_name TEXT, array_row INTEGER, file_path TEXT, extra TEXT);
CREATE INDEX candidates_class ON candidates(class_id);
CREATE INDEX candidates_keyword ON candidates(keyword);
CREATE TABLE tasks(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, class_id INTEGER NOT NULL,
  items TEXT NOT NULL, controls TEXT NOT NULL, seed INTEGER, kind TEXT NOT NULL,
  created TEXT NOT NULL, extra TEXT);
CREATE TABLE annotations(
  id INTEGER PRIMARY KEY, who TEXT NOT NULL, kind TEXT NOT NULL,
  class_id INTEGER NOT NULL, item_id TEXT NOT NULL, value INTEGER NOT NULL,
  at TEXT NOT NULL, ui_version TEXT NOT NULL, task_id TEXT, assignment_id TEXT,
  assignment_status TEXT, worker TEXT, extra TEXT);
CREATE INDEX annotations_item ON annotations(item_id);
CREATE INDEX annotations_task ON annotations(task_id);
CREATE INDEX annotations_assignment ON annotations(assignment_id);
CREATE INDEX annotations_class_kind ON annotations(class_id, kind);
CREATE TABLE blacklist(
  id INTEGER PRIMARY KEY, item_id TEXT NOT NULL, reason TEXT NOT NULL,
  who TEXT NOT NULL, at TEXT NOT NULL, undo INTEGER NOT NULL);
CREATE INDEX blacklist_item ON blacklist(item_id);
CREATE TABLE neighbours(
  candidate_id TEXT NOT NULL, metric TEXT NOT NULL, ref_ids TEXT NOT NULL,
  distances BLOB NOT NULL, PRIMARY KEY(candidate_id, metric));
CREATE TABLE verdicts(
  id INTEGER PRIMARY KEY, candidate_id TEXT NOT NULL, ref_id TEXT NOT NULL,
  metric TEXT NOT NULL, is_duplicate INTEGER NOT NULL, who TEXT NOT NULL,
  at TEXT NOT NULL);
CREATE INDEX verdicts_candidate ON verdicts(candidate_id);
CREATE TABLE neighbour_reviews(
  id INTEGER PRIMARY KEY, candidate_id TEXT NOT NULL, metric TEXT NOT NULL,
  reviewer TEXT NOT NULL, refs TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX neighbour_reviews_candidate ON neighbour_reviews(candidate_id);
CREATE TABLE revisions(
  seq INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, strategy TEXT NOT NULL,
  params TEXT NOT NULL, seed INTEGER, parent TEXT REFERENCES revisions(name),
  valid INTEGER NOT NULL, created TEXT NOT NULL, shortfall TEXT NOT NULL);
CREATE TABLE revision_members(
  revision TEXT NOT NULL REFERENCES revisions(name), pos INTEGER NOT NULL,
  item_id TEXT NOT NULL, class_id INTEGER NOT NULL, bin INTEGER,
  origin TEXT NOT NULL, from_bin INTEGER, PRIMARY KEY(revision, pos));
CREATE TABLE review_states(
  id INTEGER PRIMARY KEY, revision TEXT NOT NULL REFERENCES revisions(name),
  class_id INTEGER NOT NULL, reviewed INTEGER NOT NULL,
  problematic INTEGER NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX review_states_revision ON review_states(revision);
CREATE TABLE artifacts(
  name TEXT PRIMARY KEY, path TEXT NOT NULL, sha256 TEXT NOT NULL,
  stage TEXT NOT NULL, params TEXT NOT NULL, version TEXT NOT NULL,
  created TEXT NOT NULL);
CREATE TABLE stages(
  stage TEXT NOT NULL, key TEXT NOT NULL, done INTEGER NOT NULL, artifact TEXT,
  at TEXT NOT NULL, PRIMARY KEY(stage, key));
CREATE TABLE predictions(
  model TEXT NOT NULL, dataset TEXT NOT NULL, path TEXT NOT NULL,
  sha256 TEXT NOT NULL, created TEXT NOT NULL, extra TEXT,
  PRIMARY KEY(dataset, model));
"""

# Version 2: candidates get a compact unique ``key`` (32 digest bytes for sha256
# content ids, see retest.store._sqlite_candidates.candidate_key) instead of the
# unique index on the 64-character ``id`` text, which halves the index that bulk
# ingest inserts random keys into. The table is rebuilt (a column's UNIQUE cannot
# be dropped in place); ``seq`` values, hence the insertion order, are kept.
# ``retest_candidate_key`` is registered on the connection by the migration code.
_V2 = """
CREATE TABLE candidates_v2(
  seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, id TEXT NOT NULL,
  source TEXT NOT NULL, source_ref TEXT NOT NULL, class_id INTEGER, keyword TEXT,
  date_taken TEXT, date_uploaded TEXT, url TEXT, license TEXT, width INTEGER,
  height INTEGER, array_name TEXT, array_row INTEGER, file_path TEXT, extra TEXT);
INSERT INTO candidates_v2(
  seq, key, id, source, source_ref, class_id, keyword, date_taken, date_uploaded,
  url, license, width, height, array_name, array_row, file_path, extra)
SELECT seq, retest_candidate_key(id), id, source, source_ref, class_id, keyword,
  date_taken, date_uploaded, url, license, width, height, array_name, array_row,
  file_path, extra FROM candidates ORDER BY seq;
DROP TABLE candidates;
ALTER TABLE candidates_v2 RENAME TO candidates;
CREATE INDEX candidates_class ON candidates(class_id);
CREATE INDEX candidates_keyword ON candidates(keyword);
"""

# Version 3: the id text is no longer stored; it is decoded from ``key`` (the
# inverse of candidate_key), 64 bytes less per row and per bulk-insert JSON row.
_V3 = """
ALTER TABLE candidates DROP COLUMN id;
"""

# Version 4: the unique index on the 32-byte ``key`` goes. Bulk ingest inserts
# random keys, so every commit rewrote leaf pages all over that index, and once it
# outgrew the page cache (about 2 M candidates) ingest slowed from ~100k to ~25k
# rows/s. Candidates now carry ``kp``, a 64-bit integer prefix of the key
# (retest.store._sqlite_candidates.candidate_kp), indexed in two tiers by partial
# indexes: rows up to ``candidate_tiers.boundary`` (built in one sorted pass) and
# the newer rows (small, so inserts stay in cache). Tiers are rebuilt when the new
# tier grows past half the old one. Equal prefixes of different keys are allowed:
# look-ups and the uniqueness check compare the full key. The tier indexes are
# created by code (their boundary is a literal), after this script.
_V4 = """
CREATE TABLE candidates_v4(
  seq INTEGER PRIMARY KEY, key BLOB NOT NULL, kp INTEGER NOT NULL,
  source TEXT NOT NULL, source_ref TEXT NOT NULL, class_id INTEGER, keyword TEXT,
  date_taken TEXT, date_uploaded TEXT, url TEXT, license TEXT, width INTEGER,
  height INTEGER, array_name TEXT, array_row INTEGER, file_path TEXT, extra TEXT);
INSERT INTO candidates_v4(
  seq, key, kp, source, source_ref, class_id, keyword, date_taken, date_uploaded,
  url, license, width, height, array_name, array_row, file_path, extra)
SELECT seq, key, retest_candidate_kp(key), source, source_ref, class_id, keyword,
  date_taken, date_uploaded, url, license, width, height, array_name, array_row,
  file_path, extra FROM candidates ORDER BY seq;
DROP TABLE candidates;
ALTER TABLE candidates_v4 RENAME TO candidates;
CREATE INDEX candidates_class ON candidates(class_id);
CREATE INDEX candidates_keyword ON candidates(keyword);
CREATE TABLE candidate_tiers(boundary INTEGER NOT NULL);
INSERT INTO candidate_tiers VALUES (-1);
"""

# Version 5: grid-task answers leave the item index. A 48-image answer inserted
# 48 random keys into ``annotations_item`` (64-character content ids), which was
# most of the pages each commit wrote: measured at a million events, 1.2 ms of
# SQLite time per answer, 0.7 ms without it. Nothing looks up grid answers by
# item (aggregates scan by kind and group); the per-item look-ups that remain
# (label-error suspects and verdicts, stage-1/2 labels) use the partial index,
# which :meth:`retest.store._sqlite_items._Annotations.list` reaches by adding
# ``kind <> 'task'`` to such queries.
_V5 = """
DROP INDEX IF EXISTS annotations_item;
CREATE INDEX annotations_item_labels ON annotations(item_id) WHERE kind <> 'task';
"""

# Version 6: the people of a labeling campaign (``retest people``). A person has a
# personal sign-in link whose token is stored as its SHA-256 only; ``name_key``
# (NFC, case-folded) makes ``Ana`` and ``ana`` one person. Sessions (a browser
# signed in by a link) are keyed by the hash of their random id, so revoking a
# person deletes them at once. ``people_events`` audits every change (added,
# new link, revoked, a worker's answers excluded from the counts or included
# again); exclusions are read from it, latest event per worker.
_V6 = """
CREATE TABLE people(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, name_key TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL, token_hash TEXT UNIQUE, anonymous INTEGER NOT NULL,
  created TEXT NOT NULL, revoked TEXT);
CREATE TABLE sessions(
  id TEXT PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id),
  created TEXT NOT NULL, expires TEXT NOT NULL);
CREATE INDEX sessions_person ON sessions(person_id);
CREATE TABLE people_events(
  id INTEGER PRIMARY KEY, subject TEXT NOT NULL, action TEXT NOT NULL,
  who TEXT NOT NULL, detail TEXT NOT NULL, at TEXT NOT NULL);
"""

# Version 7: the source ids two or more candidates hold, kept at every insert,
# so linking them (``source_groups``, read by every eligibility decision) reads
# those few rows instead of sorting every candidate's source id. An insert finds
# them through an index on the source id in two tiers like ``kp`` (created by
# code at the tier boundary, after this script, which also fills the table).
_V7 = """
CREATE TABLE candidate_shared_sources(src TEXT PRIMARY KEY);
"""

# Version 8: how far each metric's neighbour lists are known to cover the
# candidates, so the stale-candidate check probes only the candidates after the
# mark and the few known gaps instead of every candidate. ``neighbour_cover``
# has one row per metric that has at least one list (so which metrics have lists
# is a read, not an index scan); ``upto``: every candidate with ``seq <= upto``
# has a list of the metric, except the ``neighbour_gaps`` rows of the metric.
# Both are derived (retest.store._sqlite_cover: triggers keep them exact under
# any write to ``neighbours``, a mark is only ever set by probing); the code
# that runs after this script fills them from the lists an older schema holds.
_V8 = """
CREATE TABLE neighbour_cover(metric TEXT PRIMARY KEY, upto INTEGER NOT NULL);
CREATE TABLE neighbour_gaps(
  metric TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(metric, seq));
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
"""SQL scripts; migration ``i`` takes the schema from version ``i`` to ``i + 1``."""
SCHEMA_VERSION = len(MIGRATIONS)
