set terminal png size 900,550 font ',10'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top right
set yrange [0:*]
set datafile missing 'NaN'
set output 'docs/reports/plots/tpcc-throughput.png'
set title 'TPC-C New-Orders per minute (higher is better)'
set ylabel 'tpmC'
plot 'docs/reports/plots/tpcc-compare.dat' index 0 using 2:xtic(1) title 'low contention (10 warehouses/node)', '' index 1 using 2 title 'high contention (1 warehouse/node)'
set output 'docs/reports/plots/tpcc-mean.png'
set title 'TPC-C mean transaction latency (lower is better)'
set ylabel 'microseconds'
plot 'docs/reports/plots/tpcc-compare.dat' index 0 using 4:xtic(1) title 'low contention (10 warehouses/node)', '' index 1 using 4 title 'high contention (1 warehouse/node)'
set output 'docs/reports/plots/tpcc-p999.png'
set title 'TPC-C 99.9th percentile latency (lower is better)'
set ylabel 'microseconds'
plot 'docs/reports/plots/tpcc-compare.dat' index 0 using 5:xtic(1) title 'low contention (10 warehouses/node)', '' index 1 using 5 title 'high contention (1 warehouse/node)'
