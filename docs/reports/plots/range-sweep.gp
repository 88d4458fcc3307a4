set terminal png size 900,600 font ',10'
set datafile missing 'NaN'
set key outside right
set grid
set logscale x 2
set logscale y
set xlabel 'clients'
set ylabel 'ops/s (acquire + release), log scale'
set output 'docs/reports/plots/range-micro-w0.png'
set title 'range locks, micro, 0% writes (2 nodes, soft transport)'
plot [0.8:20] 'docs/reports/plots/range-micro-w0.dat' using 1:2 with linespoints title 'combiner-rpc', 'docs/reports/plots/range-micro-w0.dat' using 1:3 with linespoints title 'combiner-rdma', 'docs/reports/plots/range-micro-w0.dat' using 1:4 with linespoints title 'itree', 'docs/reports/plots/range-micro-w0.dat' using 1:5 with linespoints title 'segment', 'docs/reports/plots/range-micro-w0.dat' using 1:6 with linespoints title 'citron'
set output 'docs/reports/plots/range-micro-w1.png'
set title 'range locks, micro, 1% writes (2 nodes, soft transport)'
plot [0.8:20] 'docs/reports/plots/range-micro-w1.dat' using 1:2 with linespoints title 'combiner-rpc', 'docs/reports/plots/range-micro-w1.dat' using 1:3 with linespoints title 'combiner-rdma', 'docs/reports/plots/range-micro-w1.dat' using 1:4 with linespoints title 'itree', 'docs/reports/plots/range-micro-w1.dat' using 1:5 with linespoints title 'segment', 'docs/reports/plots/range-micro-w1.dat' using 1:6 with linespoints title 'citron'
set output 'docs/reports/plots/range-micro-w20.png'
set title 'range locks, micro, 20% writes (2 nodes, soft transport)'
plot [0.8:20] 'docs/reports/plots/range-micro-w20.dat' using 1:2 with linespoints title 'combiner-rpc', 'docs/reports/plots/range-micro-w20.dat' using 1:3 with linespoints title 'combiner-rdma', 'docs/reports/plots/range-micro-w20.dat' using 1:4 with linespoints title 'itree', 'docs/reports/plots/range-micro-w20.dat' using 1:5 with linespoints title 'segment', 'docs/reports/plots/range-micro-w20.dat' using 1:6 with linespoints title 'citron'
set output 'docs/reports/plots/range-micro-w100.png'
set title 'range locks, micro, 100% writes (2 nodes, soft transport)'
plot [0.8:20] 'docs/reports/plots/range-micro-w100.dat' using 1:2 with linespoints title 'combiner-rpc', 'docs/reports/plots/range-micro-w100.dat' using 1:3 with linespoints title 'combiner-rdma', 'docs/reports/plots/range-micro-w100.dat' using 1:4 with linespoints title 'itree', 'docs/reports/plots/range-micro-w100.dat' using 1:5 with linespoints title 'segment', 'docs/reports/plots/range-micro-w100.dat' using 1:6 with linespoints title 'citron'
