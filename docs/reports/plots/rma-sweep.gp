# kvbench lock --sweep-rma: the HPDC'16 paper's Figures 3-5, scaled
set datafile missing '?'
set grid
set key below font ',8'
set logscale x 2
set logscale y
set xlabel 'P (lock clients, 4 nodes)'
set terminal pngcairo size 2000,480 font ',10'
set output '/tmp/sweepsrc/docs/reports/plots/rma-fig3.png'
set multiplot layout 1,5 title 'Fig. 3 scaled: RMA-MCS vs spin (foMPI-Spin) and D-MCS, writers only, one lock'
set title "LB (mean latency of ECSB's runs)"
set ylabel "mean latency (us)"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig3-lb.dat' using 1:2 with linespoints title "rma-mcs", '' using 1:3 with linespoints title "spin", '' using 1:4 with linespoints title "dmcs"
set title "ECSB"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig3-ecsb.dat' using 1:2 with linespoints title "rma-mcs", '' using 1:3 with linespoints title "spin", '' using 1:4 with linespoints title "dmcs"
set title "SOB"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig3-sob.dat' using 1:2 with linespoints title "rma-mcs", '' using 1:3 with linespoints title "spin", '' using 1:4 with linespoints title "dmcs"
set title "WCSB"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig3-wcsb.dat' using 1:2 with linespoints title "rma-mcs", '' using 1:3 with linespoints title "spin", '' using 1:4 with linespoints title "dmcs"
set title "WARB"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig3-warb.dat' using 1:2 with linespoints title "rma-mcs", '' using 1:3 with linespoints title "spin", '' using 1:4 with linespoints title "dmcs"
unset multiplot
set terminal pngcairo size 1800,1000 font ',10'
set output '/tmp/sweepsrc/docs/reports/plots/rma-fig4.png'
set multiplot layout 2,3 title 'Fig. 4 scaled: RMA-RW thresholds (ECSB, one lock)'
set title "(a) T_DC, F_W = 0.2%"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4a-tdc.dat' using 1:2 with linespoints title "every 4th node", '' using 1:3 with linespoints title "every 2nd node", '' using 1:4 with linespoints title "every node", '' using 1:5 with linespoints title "2 per node", '' using 1:6 with linespoints title "4 per node"
set title "(b) T_W = T_{L,2} x T_{L,1}, F_W = 25%"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4b-tl.dat' using 1:2 with linespoints title "T_L 10-1 (T_W 10)", '' using 1:3 with linespoints title "T_L 10-10 (T_W 100)", '' using 1:4 with linespoints title "T_L 50-20 (T_W 1000)", '' using 1:5 with linespoints title "T_L 100-100 (T_W 10000)"
set title "(c) T_W = 1000 split, F_W = 25%"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4c-tl.dat' using 1:2 with linespoints title "T_L 10-100 (T_W 1000)", '' using 1:3 with linespoints title "T_L 25-40 (T_W 1000)", '' using 1:4 with linespoints title "T_L 50-20 (T_W 1000)"
set title "(d) T_W = 1000 split: mean latency"
set ylabel "mean latency (us)"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4d-tl.dat' using 1:2 with linespoints title "T_L 10-100 (T_W 1000)", '' using 1:3 with linespoints title "T_L 25-40 (T_W 1000)", '' using 1:4 with linespoints title "T_L 50-20 (T_W 1000)"
set title "(e) T_R, F_W = 0.2%"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4e-tr.dat' using 1:2 with linespoints title "T_R 10", '' using 1:3 with linespoints title "T_R 100", '' using 1:4 with linespoints title "T_R 1000", '' using 1:5 with linespoints title "T_R 4000"
set title "(f) T_R x F_W"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig4f-tr-fw.dat' using 1:2 with linespoints title "F_W 2%, T_R 100", '' using 1:3 with linespoints title "F_W 2%, T_R 1000", '' using 1:4 with linespoints title "F_W 2%, T_R 4000", '' using 1:5 with linespoints dashtype 2 title "F_W 5%, T_R 100", '' using 1:6 with linespoints dashtype 2 title "F_W 5%, T_R 1000", '' using 1:7 with linespoints dashtype 2 title "F_W 5%, T_R 4000"
unset multiplot
set terminal pngcairo size 1600,1000 font ',10'
set output '/tmp/sweepsrc/docs/reports/plots/rma-fig5.png'
set multiplot layout 2,2 title 'Fig. 5 scaled: RMA-RW vs foMPI-RW (ECSB, one lock)'
set title "(a) RMA-RW (dashed: writer-only locks)"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig5a.dat' using 1:2 with linespoints title "F_W 0.2%", '' using 1:3 with linespoints title "F_W 2%", '' using 1:4 with linespoints title "F_W 5%", '' using 1:5 with linespoints title "F_W 25%", '' using 1:6 with linespoints title "F_W 50%", '' using 1:7 with linespoints title "F_W 100%", '' using 1:8 with linespoints dashtype 2 title "spin", '' using 1:9 with linespoints dashtype 2 title "dmcs", '' using 1:10 with linespoints dashtype 2 title "rma-mcs"
set title "(b) foMPI-RW (dashed: writer-only locks)"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig5b.dat' using 1:2 with linespoints title "F_W 0.2%", '' using 1:3 with linespoints title "F_W 2%", '' using 1:4 with linespoints title "F_W 5%", '' using 1:5 with linespoints title "F_W 25%", '' using 1:6 with linespoints title "F_W 50%", '' using 1:7 with linespoints title "F_W 100%", '' using 1:8 with linespoints dashtype 2 title "spin", '' using 1:9 with linespoints dashtype 2 title "dmcs", '' using 1:10 with linespoints dashtype 2 title "rma-mcs"
set title "(c) RMA-RW / foMPI-RW throughput"
set ylabel "ratio"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig5c.dat' using 1:2 with linespoints title "F_W 0.2%", '' using 1:3 with linespoints title "F_W 2%", '' using 1:4 with linespoints title "F_W 5%", '' using 1:5 with linespoints title "F_W 25%", '' using 1:6 with linespoints title "F_W 50%", '' using 1:7 with linespoints title "F_W 100%"
set xlabel 'F_W (% writers)'
set logscale x 10
set title "(d) throughput vs writer fraction (dashed: foMPI-RW)"
set ylabel "acquires/s"
plot '/tmp/sweepsrc/docs/reports/plots/rma-fig5d.dat' using 1:2 with linespoints title "rma-rw P=4", '' using 1:3 with linespoints title "rma-rw P=16", '' using 1:4 with linespoints title "rma-rw P=64", '' using 1:5 with linespoints title "rma-rw P=256", '' using 1:6 with linespoints title "rma-rw P=512", '' using 1:7 with linespoints dashtype 2 title "fompi-rw P=4", '' using 1:8 with linespoints dashtype 2 title "fompi-rw P=16", '' using 1:9 with linespoints dashtype 2 title "fompi-rw P=64", '' using 1:10 with linespoints dashtype 2 title "fompi-rw P=256", '' using 1:11 with linespoints dashtype 2 title "fompi-rw P=512"
set logscale x 2
set xlabel 'P (lock clients, 4 nodes)'
unset multiplot
