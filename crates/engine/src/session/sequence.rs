//! Sequences of a transaction: CREATE and DROP SEQUENCE are catalog changes under the
//! transaction (they commit and roll back with it); `nextval` and `setval` change the
//! sequence's page in place, outside the transaction (see [`crate::sequence`]), so that a
//! value handed out stays handed out whatever the transaction does next.

use super::Transaction;
use crate::catalog::{name_lock, Entry, USER_DB};
use crate::error::{Error, Result};
use crate::sequence::{self, SeqOptions, SeqState, SequenceDef};
use crate::txn::lock::{LockMode, LockWait};
use crate::types::{Oid, RelFileLocator};

impl Transaction {
    /// CREATE SEQUENCE: the catalog entry and the sequence's one-page relation.
    pub fn create_sequence(&self, name: &str, options: &SeqOptions) -> Result<Oid> {
        options.check()?;
        self.call(|| {
            self.command();
            let xid = self.ensure_xid()?;
            self.lock(name_lock(name), LockMode::Exclusive, LockWait::Block)?;
            if self.lookup_name(name)?.is_some() {
                return Err(Error::DuplicateTable { name: name.into() });
            }
            let oid = self.engine.new_oid();
            self.lock_table_mode(oid, LockMode::AccessExclusive, LockWait::NoWait)?;
            let def = SequenceDef {
                oid,
                name: name.to_string(),
                rel: RelFileLocator::new(USER_DB, oid.0),
                options: *options,
            };
            self.heap(def.rel).create()?;
            self.st.borrow_mut().drop_at_abort.push(def.rel);
            sequence::init(&self.engine.pool, &self.engine.wal, &def)?;
            self.insert_entry(xid, &Entry::Sequence(def))?;
            Ok(oid)
        })
    }

    /// ALTER SEQUENCE: new options in the catalog entry, under the transaction (the current
    /// value stays; RESTART is a `setval`).
    pub fn alter_sequence(&self, seq: Oid, options: &SeqOptions) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(seq, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, mut def) = self.sequence_entry(seq)?;
            options.check()?;
            def.options = *options;
            self.rewrite_entry(tid, Some(&Entry::Sequence(def)))
        })
    }

    /// DROP SEQUENCE: the entry goes now, the relation file at commit.
    pub fn drop_sequence(&self, seq: Oid) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(seq, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.sequence_entry(seq)?;
            self.lock(name_lock(&def.name), LockMode::Exclusive, LockWait::Block)?;
            self.rewrite_entry(tid, None)?;
            self.st.borrow_mut().drop_at_commit.push(def.rel);
            Ok(())
        })
    }

    /// The definition of sequence `seq`, under ACCESS SHARE (so that no DROP runs under the
    /// caller).
    pub fn sequence_def(&self, seq: Oid) -> Result<SequenceDef> {
        self.call(|| {
            self.lock_table_mode(seq, LockMode::AccessShare, LockWait::Block)?;
            Ok(self.sequence_entry(seq)?.1)
        })
    }

    /// `nextval`: never rolled back, durable before it returns.
    pub fn nextval(&self, seq: Oid) -> Result<i64> {
        let def = self.sequence_def(seq)?;
        self.call(|| sequence::next_value(&self.engine.pool, &self.engine.wal, &def))
    }

    /// `setval`: never rolled back, durable before it returns.
    pub fn setval(&self, seq: Oid, value: i64, is_called: bool) -> Result<()> {
        let def = self.sequence_def(seq)?;
        self.call(|| sequence::set_value(&self.engine.pool, &self.engine.wal, &def, value, is_called))
    }

    /// Every sequence this transaction can see, by name.
    pub fn sequences(&self) -> Result<Vec<SequenceDef>> {
        let all = self.entries()?;
        Ok(all
            .into_iter()
            .filter_map(|e| match e {
                Entry::Sequence(s) => Some(s),
                _ => None,
            })
            .collect())
    }

    /// The sequence's state now (`SELECT * FROM seq`).
    pub fn sequence_state(&self, seq: Oid) -> Result<SeqState> {
        let def = self.sequence_def(seq)?;
        self.call(|| sequence::state(&self.engine.pool, &def))
    }

    fn sequence_entry(&self, seq: Oid) -> Result<(crate::page::Tid, SequenceDef)> {
        self.entry_of_kind(seq, "a sequence", |e| match e {
            Entry::Sequence(def) => Ok(def),
            other => Err(other),
        })
    }
}
