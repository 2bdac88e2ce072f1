"""Stand-ins for what a paper table needs but this machine cannot run (hosted models, GPU engines, the CRAG
mock API), so the rehearsal scale runs every table end to end on a CPU through hoprag's real code paths."""
