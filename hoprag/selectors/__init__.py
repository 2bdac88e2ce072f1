"""Context selectors (spec/self_correcting_rag.md, phase I).

Will hold Self-Correcting RAG's MMKP context selection: the fused dense+sparse candidate pool, leader
clustering into groups, and the exact Pareto-frontier DP (with dense-table DP, greedy, FPTAS, top-k and
MMR baselines) behind one `Selector` interface that any method can chain before its generator.
"""
