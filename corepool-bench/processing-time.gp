set terminal pngcairo size 960,600 enhanced font 'sans,11'
set linetype 1 lc rgb '#1f77b4'
set linetype 2 lc rgb '#d62728'
set linetype 3 lc rgb '#2ca02c'
set linetype 4 lc rgb '#ff7f0e'
set linetype 5 lc rgb '#9467bd'
set linetype 6 lc rgb '#8c564b'
set linetype 7 lc rgb '#e377c2'
set linetype 8 lc rgb '#17becf'
set linetype cycle 8
set key below
set grid
set output 'corepool-bench/processing-time.png'
set title "Processing time of 60 s of audio vs engine threads (jemalloc, 2 usable cpus)"
set xlabel "engine threads / workers"
set ylabel "processing time (s), median with min-max of repeats"
set yrange [0:*]
set xtics 1
set xrange [0.5:*]
$d0 << EOD
2 0.9554 0.9554 0.9554
EOD
$d1 << EOD
2 0.9946 0.9946 0.9946
EOD
plot $d0 using 1:2:3:4 with yerrorlines lw 2 pt 7 title "thread mode, intra-op 1", \
     $d1 using 1:2:3:4 with yerrorlines lw 2 pt 7 dt 2 title "process mode, intra-op 1"
