-- A node that does not evaluate the rules (a cluster's follower, docs/scale-out.md) reads a
-- group's alert states only when they changed since its last look, instead of every alert
-- of every group every few seconds (storage/rules.py `group_versions`): each write of a
-- group's alert states raises its states_version.
ALTER TABLE rule_groups ADD COLUMN states_version BIGINT NOT NULL DEFAULT 0;
