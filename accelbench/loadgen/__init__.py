"""What every benchmark served under MLPerf LoadGen stands on, knowing none of them: parameters, test settings
and their plan, a test's start, the sample library, reruns, the logs, the tail, the heartbeat, the record's
LoadGen part and the Server-rate search."""
