module github.com/dualmap/dualmap

go 1.26
