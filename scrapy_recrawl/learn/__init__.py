"""Offline learning (GP4C); never imported by a running crawl.

By job: :mod:`~.gp` (trees and operators), :mod:`~.config` (a run's parameters),
:mod:`~.fitness` and :mod:`~.population` (batched replay of a population),
:mod:`~.search` (folds, seeds, the final pick, workers), :mod:`~.evolve` (the
run), :mod:`~.preflight` (history size, dry run), :mod:`~.noise` (spread over seeds
and folds), :mod:`~.report` (result, JSON, plot), :mod:`~.progress`, :mod:`~.tables`,
:mod:`~.histories` (change matrices and the store's monitoring sample).
"""
