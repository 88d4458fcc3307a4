set terminal png size 1600,420 font ',10'
set datafile separator whitespace
set key top left
set logscale y
set grid
set xlabel 'threads per node'
set ylabel 'ops/s (lock+unlock)'
set xtics 1
set output 'docs/reports/plots/lock-sweep-L20.png'
set multiplot layout 1,4 title '20 locks, 2 nodes, soft transport'
set title '85% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L20.dat' index 0 using 2:3 with linespoints title 'alock', '' index 0 using 2:4 with linespoints title 'spin', '' index 0 using 2:5 with linespoints title 'mcs'
set title '90% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L20.dat' index 1 using 2:3 with linespoints title 'alock', '' index 1 using 2:4 with linespoints title 'spin', '' index 1 using 2:5 with linespoints title 'mcs'
set title '95% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L20.dat' index 2 using 2:3 with linespoints title 'alock', '' index 2 using 2:4 with linespoints title 'spin', '' index 2 using 2:5 with linespoints title 'mcs'
set title '100% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L20.dat' index 3 using 2:3 with linespoints title 'alock', '' index 3 using 2:4 with linespoints title 'spin', '' index 3 using 2:5 with linespoints title 'mcs'
unset multiplot
set output 'docs/reports/plots/lock-sweep-L100.png'
set multiplot layout 1,4 title '100 locks, 2 nodes, soft transport'
set title '85% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L100.dat' index 0 using 2:3 with linespoints title 'alock', '' index 0 using 2:4 with linespoints title 'spin', '' index 0 using 2:5 with linespoints title 'mcs'
set title '90% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L100.dat' index 1 using 2:3 with linespoints title 'alock', '' index 1 using 2:4 with linespoints title 'spin', '' index 1 using 2:5 with linespoints title 'mcs'
set title '95% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L100.dat' index 2 using 2:3 with linespoints title 'alock', '' index 2 using 2:4 with linespoints title 'spin', '' index 2 using 2:5 with linespoints title 'mcs'
set title '100% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L100.dat' index 3 using 2:3 with linespoints title 'alock', '' index 3 using 2:4 with linespoints title 'spin', '' index 3 using 2:5 with linespoints title 'mcs'
unset multiplot
set output 'docs/reports/plots/lock-sweep-L1000.png'
set multiplot layout 1,4 title '1000 locks, 2 nodes, soft transport'
set title '85% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L1000.dat' index 0 using 2:3 with linespoints title 'alock', '' index 0 using 2:4 with linespoints title 'spin', '' index 0 using 2:5 with linespoints title 'mcs'
set title '90% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L1000.dat' index 1 using 2:3 with linespoints title 'alock', '' index 1 using 2:4 with linespoints title 'spin', '' index 1 using 2:5 with linespoints title 'mcs'
set title '95% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L1000.dat' index 2 using 2:3 with linespoints title 'alock', '' index 2 using 2:4 with linespoints title 'spin', '' index 2 using 2:5 with linespoints title 'mcs'
set title '100% local'
plot [0.5:3.5] 'docs/reports/plots/lock-sweep-L1000.dat' index 3 using 2:3 with linespoints title 'alock', '' index 3 using 2:4 with linespoints title 'spin', '' index 3 using 2:5 with linespoints title 'mcs'
unset multiplot
set terminal png size 1400,800 font ',10'
set output 'docs/reports/plots/lock-cdf.png'
set logscale x
set xtics autofreq
set format x '%g'
unset logscale y
set xlabel 'latency (us), log scale'
set ylabel 'CDF'
set datafile separator ','
set key bottom right
set multiplot layout 2,3 title 'latency CDF, 3 threads per node, 2 nodes'
set title '20 locks, 100% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L20-P100.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
set title '100 locks, 100% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L100-P100.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
set title '1000 locks, 100% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L1000-P100.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
set title '20 locks, 95% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L20-P95.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
set title '100 locks, 95% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L100-P95.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
set title '1000 locks, 95% local'
plot [:] [0:1] 'docs/reports/plots/lock-cdf-L1000-P95.dat' index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'
unset multiplot
