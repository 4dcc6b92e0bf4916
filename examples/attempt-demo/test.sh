got=$(sh add.sh 2 2)
echo "2 + 2 = $got"
[ "$got" = 4 ]
