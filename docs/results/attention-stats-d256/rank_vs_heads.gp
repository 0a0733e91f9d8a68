set terminal pngcairo noenhanced size 1200,520 font ',10'
set output 'rank_vs_heads.png'
set grid
set logscale x 2
set xrange [5:51.2]
set xtics ('8' 8, '32' 32)
set xlabel 'heads'
set ylabel 'rank of the logits S (per head)'
set yrange [0:*]
set key top right opaque box
titles = 'mha fixed_head talking_heads interacting'
set multiplot layout 1,2 title 'numerical (solid) and effective (dashed) rank of S = QK^T/sqrt(d_k) against heads; d/h and min(n̄, m̄) as references'
set arrow 1 from 8, graph 0 to 8, graph 1 nohead dt 2 lw 2 lc 'gray'
set label 1 'h_max = 8' at 8, graph 0.95 offset 0.5,0
set title 'self-attention'
plot for [i=0:3] 'rank_vs_heads.dat' index 0+i using 1:2 with linespoints lw 2 pt 7 lc i+1 title word(titles, i+1), \
     for [i=0:3] 'rank_vs_heads.dat' index 0+i using 1:3 with linespoints lw 2 dt 2 pt 6 lc i+1 notitle, \
     256 / x with lines lw 1 lc 'black' dt 3 title 'd/h', \
     40.8325 with lines lw 1 lc 'gray' dt 4 title 'min(n̄, m̄) = 40.8'
set title 'cross-attention'
plot for [i=0:3] 'rank_vs_heads.dat' index 4+i using 1:2 with linespoints lw 2 pt 7 lc i+1 title word(titles, i+1), \
     for [i=0:3] 'rank_vs_heads.dat' index 4+i using 1:3 with linespoints lw 2 dt 2 pt 6 lc i+1 notitle, \
     256 / x with lines lw 1 lc 'black' dt 3 title 'd/h', \
     40.665 with lines lw 1 lc 'gray' dt 4 title 'min(n̄, m̄) = 40.7'
unset multiplot
