-- One full-text (GIN) index per space level, as 0017 gave the vector search one HNSW index per
-- level: a chain's per-level text searches each read their own level's postings.
--
-- With one GIN index over every chunk, a level's search matched its rarest terms up to the
-- matching bound counted within the level (search/bm25.py), but the index returned those terms'
-- postings in every level: for a project holding a tenth of the organisation's chunks the search
-- read ten times the chunks it ranked, and the chain's three text searches cost about four
-- times the one over the chain (docs/decisions.md, "Text indexes per level"). The text search
-- names its level as a literal (search/fulltext.py), so the planner picks the level's index.
-- Every text search is of one level, so the index over all chunks goes: keeping it would double
-- the GIN upkeep of every ingest for no reader.
CREATE INDEX chunks_tsv_organisation ON chunks USING gin (tsv) WHERE space_level = 'organisation';
CREATE INDEX chunks_tsv_business_unit ON chunks USING gin (tsv) WHERE space_level = 'business_unit';
CREATE INDEX chunks_tsv_department ON chunks USING gin (tsv) WHERE space_level = 'department';
CREATE INDEX chunks_tsv_group ON chunks USING gin (tsv) WHERE space_level = 'group';
CREATE INDEX chunks_tsv_team ON chunks USING gin (tsv) WHERE space_level = 'team';
CREATE INDEX chunks_tsv_project ON chunks USING gin (tsv) WHERE space_level = 'project';
CREATE INDEX chunks_tsv_subproject ON chunks USING gin (tsv) WHERE space_level = 'subproject';
CREATE INDEX chunks_tsv_personal ON chunks USING gin (tsv) WHERE space_level = 'personal';

DROP INDEX chunks_tsv;
