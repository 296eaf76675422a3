-- The lookup rows by the chain position they point at: every verification checks the rows of
-- one chain against its entries (attribution/index_check.py), which without these scanned the
-- whole table once per chain, i.e. work growing with the square of the number of organisations.
CREATE INDEX attributions_chain_seq ON attributions (chain, seq);
CREATE INDEX attribution_links_chain_seq ON attribution_links (chain, seq);
