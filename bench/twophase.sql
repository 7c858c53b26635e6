\set aid random(1, 100000 * :scale)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
PREPARE TRANSACTION 'p_:client_id';
COMMIT PREPARED 'p_:client_id';
