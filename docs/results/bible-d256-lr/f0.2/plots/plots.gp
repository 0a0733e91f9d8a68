set terminal pngcairo size 1200,540 font ',10' noenhanced
set key top left opaque box
set grid
set logscale x 2
set xrange [5:51.2]
set xlabel 'heads'
set xtics ('8' 8, '32' 32)
titles = 'mha interacting'
set arrow 1 from 8, graph 0 to 8, graph 1 nohead dt 2 lw 2 lc 'gray'
set label 1 'h_max = 8' at 8, graph 0.04 offset 0.5,0
set output 'quality_vs_heads.png'
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0
set key top right opaque box
set terminal pngcairo size 1200,840 font ',10' noenhanced
set multiplot layout 2,3 title 'bible: test quality against heads'
set ylabel 'BLEU'
plot for [i=0:1] 'by_heads.dat' index i using 1:2:3 with yerrorlines lw 2 title word(titles, i+1)
set ylabel 'chrF'
plot for [i=0:1] 'by_heads.dat' index i using 1:4:5 with yerrorlines lw 2 title word(titles, i+1)
set ylabel 'WER %'
plot for [i=0:1] 'by_heads.dat' index i using 1:6:7 with yerrorlines lw 2 title word(titles, i+1)
set ylabel 'METEOR'
plot for [i=0:1] 'by_heads.dat' index i using 1:8:9 with yerrorlines lw 2 title word(titles, i+1)
set ylabel 'ROUGE-L'
plot for [i=0:1] 'by_heads.dat' index i using 1:10:11 with yerrorlines lw 2 title word(titles, i+1)
set ylabel 'CIDEr-D'
plot for [i=0:1] 'by_heads.dat' index i using 1:12:13 with yerrorlines lw 2 title word(titles, i+1)
unset multiplot
set terminal pngcairo size 1200,540 font ',10' noenhanced
set output 'cost_vs_heads.png'
set multiplot layout 1,2 title 'training cost against heads'
set ylabel 'ms per training step'
plot for [i=0:1] 'by_heads.dat' index i using 1:14 with linespoints lw 2 title word(titles, i+1)
set ylabel 'peak memory (MiB, RSS)'
plot for [i=0:1] 'by_heads.dat' index i using 1:15 with linespoints lw 2 title word(titles, i+1)
unset multiplot
set yrange [*:*]
unset arrow 1
unset label 1
set offsets 0, 0, 0, 0
unset logscale x
set xrange [*:*]
set xtics autofreq
set xlabel 'step'
set ylabel 'cross-entropy per target token (nats)'
set logscale y
set output 'loss_curves.png'
set key top right
set title 'training (lines) and dev (points) loss, seed 1'
plot '../curves/mha-h32-s1.train.tsv' using 1:4 with lines lw 2 lc 1 title 'mha h32', \
     '../curves/mha-h32-s1.dev.tsv' using 1:4 with points pt 7 ps 1.3 lc 1 notitle, \
     '../curves/interacting-h32-s1.train.tsv' using 1:4 with lines lw 2 lc 2 title 'interacting h32', \
     '../curves/interacting-h32-s1.dev.tsv' using 1:4 with points pt 7 ps 1.3 lc 2 notitle, \
     '../curves/mha-h8-s1.train.tsv' using 1:4 with lines lw 2 lc 3 title 'mha h8', \
     '../curves/mha-h8-s1.dev.tsv' using 1:4 with points pt 7 ps 1.3 lc 3 notitle
unset logscale y
unset title
