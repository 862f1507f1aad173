// Package sale is the domain of seckill: activities, grabs and orders, the errors a sale can end
// in, and the interfaces that stock gates, queues and stores implement. It knows nothing of HTTP,
// Redis or SQL; adapters import it, never the other way round.
package sale
