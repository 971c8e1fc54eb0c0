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
set output 'corepool-bench/throughput.png'
set title "Throughput: process vs thread mode vs the bare ceilings (intra-op 1, jemalloc)"
set xlabel "engine threads / workers"
set ylabel "segments per second (median)"
set yrange [0:*]
set xtics 1
set xrange [0.5:*]
$d0 << EOD
2 124.55
EOD
$d1 << EOD
2 119.64
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 title "thread mode (full pipeline)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 title "process mode (full pipeline)"
