package scheduler

// ewls3 is the running sums of an exponentially weighted least-squares fit
// of y on three regressors: each observation weighs 1 when added and loses
// aheadDecay of its weight with every later one. Not safe for concurrent
// use: its owner locks.
type ewls3 struct {
	// The weighted count and sums of the regressors x and of y, of the
	// regressors' products and of their products with y.
	n, sy float64
	s     [3]float64
	sxy   [3]float64
	sxx   [3][3]float64
}

// add counts one observation.
func (e *ewls3) add(x [3]float64, y float64) {
	d := 1 - aheadDecay
	e.n = e.n*d + 1
	e.sy = e.sy*d + y
	for i := range x {
		e.s[i] = e.s[i]*d + x[i]
		e.sxy[i] = e.sxy[i]*d + x[i]*y
		for j := range x {
			e.sxx[i][j] = e.sxx[i][j]*d + x[i]*x[j]
		}
	}
}

// cov returns the weighted covariances of the regressors (c) and of each
// with y (cy).
func (e *ewls3) cov() (c [3][3]float64, cy [3]float64) {
	var m [3]float64
	for i := range m {
		m[i] = e.s[i] / e.n
	}
	my := e.sy / e.n
	for i := range c {
		cy[i] = e.sxy[i]/e.n - m[i]*my
		for j := range c {
			c[i][j] = e.sxx[i][j]/e.n - m[i]*m[j]
		}
	}
	return c, cy
}

// solve3 returns the coefficients of the three regressors from their
// covariances c and cy (Cramer's rule); ok is false when the fit is not
// identified: a regressor with a spread below aheadMinSpread, or one
// nearly a combination of the others.
func solve3(c [3][3]float64, cy [3]float64) (b [3]float64, ok bool) {
	const spread2 = aheadMinSpread * aheadMinSpread
	if c[0][0] < spread2 || c[1][1] < spread2 || c[2][2] < spread2 {
		return b, false
	}
	det := det3(c)
	if det < 0.01*c[0][0]*c[1][1]*c[2][2] {
		return b, false
	}
	for k := range b {
		m := c
		for i := range m {
			m[i][k] = cy[i]
		}
		b[k] = det3(m) / det
	}
	return b, true
}

// det3 is the determinant of m.
func det3(m [3][3]float64) float64 {
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}
