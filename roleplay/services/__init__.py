"""The roleplay layer's functions, by what they do; ``roleplay.service`` is the
public module and re-exports them all.

- ``reads``: the state at any entry, reviews, the state panel's detail, the
  diff of two entries, the checkpoints on a path;
- ``writes``: corrections, review amendments and decisions, checkpoints, turn
  repairs, archiving the character (audited through ``sessiontree.services``);
- ``planning``: ``plan_write``, a write's checks without the append;
- ``history``: moving the leaf, forking and compacting, with the state the new
  position derives, and the compaction hook;
- ``branch``: the branch a write is checked against (shared by the writes).
"""
