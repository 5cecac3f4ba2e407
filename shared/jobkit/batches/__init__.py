"""Batches: a set of jobs that ends when every one of them has, with callbacks
pushed then (:mod:`jobkit.records.batches` keeps the counts)."""
