package sale

import "fmt"

// The rules several use cases share, each written once with the refusal it answers.

// MaxPage bounds what one read of a list returns: orders, activities, dead letters, payments,
// deliveries, entries of the audit log. (A leaderboard has its own bound, MaxBoard.)
const MaxPage = 500

// checkPage is the rule of a list's page: limit 1 to MaxPage and, for a list read page by page
// back, before (the key the page starts below; 0: the newest) not negative. beforeWhat names that
// key in the refusal ("order id", "seq"); "" for a list with no before. Errors: ErrInvalid.
func checkPage(limit int, before int64, beforeWhat string) error {
	switch {
	case limit >= 1 && limit <= MaxPage && before >= 0:
		return nil
	case beforeWhat == "":
		return fmt.Errorf("%w: limit must be 1 to %d", ErrInvalid, MaxPage)
	}
	return fmt.Errorf("%w: limit must be 1 to %d and before a positive %s", ErrInvalid, MaxPage, beforeWhat)
}

// badID is the refusal of an id that ValidID refuses; field names it ("activity", "order_token").
func badID(field string) error {
	return fmt.Errorf("%w: %s must be 1 to %d letters, digits, '-' or '_'", ErrInvalid, field, MaxIDLen)
}

// BadUserID is the refusal of a user id that ValidUserID refuses; field names it ("user").
func BadUserID(field string) error {
	return fmt.Errorf("%w: %s must be 1 to %d printable ASCII characters", ErrInvalid, field, MaxUserIDLen)
}
