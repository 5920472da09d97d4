package seats

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// AggregateType is the type of a show's events.
const AggregateType = "show"

// Command types.
const (
	CmdScheduleShow      = "ScheduleShow"
	CmdReserveSeats      = "ReserveSeats"
	CmdCancelReservation = "CancelReservation"
	CmdMoveReservation   = "MoveReservation"
)

// Event types.
const (
	EvShowScheduled        = "ShowScheduled"
	EvSeatsReserved        = "SeatsReserved"
	EvReservationCancelled = "ReservationCancelled"
)

// Bounds of a show and a command.
const (
	MaxRows           = 26 // rows A to Z
	MaxSeatsPerRow    = 40
	MaxSeatsPerCmd    = 10
	maxTitleLength    = 200
	maxIDLength       = 64
	maxHolderName     = 200
	maxHolderEmail    = 254
	stateSchema       = "show/v1"
	aggregateField    = "showId"
	timeLayoutStartAt = time.RFC3339
)

// Show is a show's state: what was scheduled and who holds which seat.
// Only active reservations are kept (a cancelled one is gone), so the state
// is bounded by the number of seats.
type Show struct {
	Scheduled   bool   `json:"scheduled"`
	Title       string `json:"title,omitempty"`
	StartsAt    string `json:"startsAt,omitempty"` // RFC 3339, UTC
	Rows        int    `json:"rows,omitempty"`
	SeatsPerRow int    `json:"seatsPerRow,omitempty"`
	// Seats maps each reserved seat to its reservation.
	Seats map[string]string `json:"seats"`
	// Reservations are the active reservations by id.
	Reservations map[string]Reservation `json:"reservations"`
}

// Reservation is one active reservation.
type Reservation struct {
	CustomerID string   `json:"customerId" dynamodbav:"customerId"`
	Seats      []string `json:"seats" dynamodbav:"seats"`
}

// Capacity is the number of seats.
func (s *Show) Capacity() int { return s.Rows * s.SeatsPerRow }

// Free is the number of seats nobody holds.
func (s *Show) Free() int { return s.Capacity() - len(s.Seats) }

// clone copies s so that Evolve never changes the state it was given.
func (s Show) clone() Show {
	s.Seats = maps.Clone(s.Seats)
	s.Reservations = maps.Clone(s.Reservations)
	if s.Seats == nil {
		s.Seats = map[string]string{}
	}
	if s.Reservations == nil {
		s.Reservations = map[string]Reservation{}
	}
	return s
}

// Event data.

// ShowScheduled is the data of EvShowScheduled.
type ShowScheduled struct {
	Title       string `json:"title"`
	StartsAt    string `json:"startsAt"`
	Rows        int    `json:"rows"`
	SeatsPerRow int    `json:"seatsPerRow"`
}

// SeatsChanged is the data of EvSeatsReserved and EvReservationCancelled:
// the reservation, its customer and the seats it took or released.
type SeatsChanged struct {
	ReservationID string   `json:"reservationId"`
	CustomerID    string   `json:"customerId"`
	Seats         []string `json:"seats"`
}

// Holder is the personal data of a reservation (kept apart from the event
// data, erasable).
type Holder struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// Decider is the seat-reservation domain for package es.
type Decider struct{}

var _ es.Decider[Show] = Decider{}

// AggregateType implements es.Decider.
func (Decider) AggregateType() string { return AggregateType }

// AggregateField implements es.Decider: commands name the show as showId.
func (Decider) AggregateField() string { return aggregateField }

// StateSchema implements es.Decider.
func (Decider) StateSchema() string { return stateSchema }

// Initial implements es.Decider: a show not yet scheduled.
func (Decider) Initial() Show {
	return Show{Seats: map[string]string{}, Reservations: map[string]Reservation{}}
}

// Evolve implements es.Decider. It refuses events the state cannot take —
// a seat reserved twice, a reservation cancelled that is not active — which
// only a log written by something other than Decide could hold.
func (Decider) Evolve(s Show, e es.Event) (Show, error) {
	s = s.clone()
	switch e.Type {
	case EvShowScheduled:
		var d ShowScheduled
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return s, fmt.Errorf("data: %w", err)
		}
		if s.Scheduled {
			return s, fmt.Errorf("the show is already scheduled")
		}
		s.Scheduled, s.Title, s.StartsAt, s.Rows, s.SeatsPerRow = true, d.Title, d.StartsAt, d.Rows, d.SeatsPerRow
	case EvSeatsReserved:
		var d SeatsChanged
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return s, fmt.Errorf("data: %w", err)
		}
		if _, ok := s.Reservations[d.ReservationID]; ok {
			return s, fmt.Errorf("reservation %s is already active", d.ReservationID)
		}
		for _, seat := range d.Seats {
			if !s.exists(seat) {
				return s, fmt.Errorf("seat %s does not exist", seat)
			}
			if r, taken := s.Seats[seat]; taken {
				return s, fmt.Errorf("seat %s is already held by reservation %s (a double booking)", seat, r)
			}
			s.Seats[seat] = d.ReservationID
		}
		s.Reservations[d.ReservationID] = Reservation{CustomerID: d.CustomerID, Seats: slices.Clone(d.Seats)}
	case EvReservationCancelled:
		var d SeatsChanged
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return s, fmt.Errorf("data: %w", err)
		}
		r, ok := s.Reservations[d.ReservationID]
		if !ok {
			return s, fmt.Errorf("reservation %s is not active", d.ReservationID)
		}
		for _, seat := range r.Seats {
			delete(s.Seats, seat)
		}
		delete(s.Reservations, d.ReservationID)
	default:
		return s, fmt.Errorf("unknown event type %q", e.Type)
	}
	return s, nil
}

// exists reports whether seat is one of the show's seats.
func (s *Show) exists(seat string) bool {
	row, n, ok := parseSeat(seat)
	return ok && row < s.Rows && n >= 1 && n <= s.SeatsPerRow
}

// parseSeat reads a seat label: a row letter A–Z and a number 1–99 ("C12")
// in its one spelling, digits only and no leading zero, so that one seat
// has one label ("A+1" or "A01" would book A1 again under another name).
func parseSeat(seat string) (row, n int, ok bool) {
	if len(seat) < 2 || len(seat) > 3 || seat[0] < 'A' || seat[0] > 'Z' || seat[1] == '0' {
		return 0, 0, false
	}
	for i := 1; i < len(seat); i++ {
		if seat[i] < '0' || seat[i] > '9' {
			return 0, 0, false
		}
		n = n*10 + int(seat[i]-'0')
	}
	return int(seat[0] - 'A'), n, true
}

// SeatLabels lists a show's seats: A1…A<seatsPerRow>, B1, ….
func SeatLabels(rows, seatsPerRow int) []string {
	out := make([]string, 0, rows*seatsPerRow)
	for r := 0; r < rows; r++ {
		for n := 1; n <= seatsPerRow; n++ {
			out = append(out, string(rune('A'+r))+strconv.Itoa(n))
		}
	}
	return out
}

// TimeFields implements es.TimedCommands: ScheduleShow's startsAt is read
// as a time, so a retry writing it another way ("z" for "Z", the same
// instant at an offset) is the same command, answered from its record.
func (Decider) TimeFields(commandType string) []string {
	if commandType == CmdScheduleShow {
		return []string{"startsAt"}
	}
	return nil
}

var _ es.TimedCommands = Decider{}

// Decide implements es.Decider: it validates cmd against the show.
func (Decider) Decide(s Show, version int64, cmd es.Command) ([]es.NewEvent, error) {
	switch cmd.Type {
	case CmdScheduleShow:
		var d struct {
			Title    *string `json:"title"`
			StartsAt *string `json:"startsAt"`
			// Kept raw, read by wholeNumber in their own ranges.
			Rows        json.RawMessage `json:"rows"`
			SeatsPerRow json.RawMessage `json:"seatsPerRow"`
		}
		if err := decode(cmd.Data, &d); err != nil {
			return nil, err
		}
		if d.Title == nil || *d.Title == "" {
			return nil, es.Invalid("data.title", "is required: 1 to %d characters, no control characters", maxTitleLength)
		}
		if err := checkText("data.title", *d.Title, maxTitleLength); err != nil {
			return nil, err
		}
		if d.StartsAt == nil {
			return nil, es.Invalid("data.startsAt", "is required (RFC 3339, for example 2026-12-05T19:30:00Z)")
		}
		rows, err := wholeNumber("data.rows", d.Rows, MaxRows, " (rows A to Z)")
		if err != nil {
			return nil, err
		}
		seatsPerRow, err := wholeNumber("data.seatsPerRow", d.SeatsPerRow, MaxSeatsPerRow, "")
		if err != nil {
			return nil, err
		}
		// Read as ingest reads an event's times ("t" and "z" in lower
		// case are RFC 3339 too; a leap second is refused saying so).
		at, err := stream.ParseTime("data.startsAt", *d.StartsAt)
		if err != nil {
			var fe *stream.FieldError
			if errors.As(err, &fe) {
				return nil, es.Invalid(fe.Field, "%s", fe.Reason)
			}
			return nil, es.Invalid("data.startsAt", "%v", err)
		}
		// The event keeps it in UTC: an offset can carry 9999-12-31 into
		// year 10000 (or 0000-01-01 into year -1), which is no RFC 3339
		// time and no day the byDay index can be asked for.
		if y := at.UTC().Year(); y < 0 || y > 9999 {
			return nil, es.Invalid("data.startsAt", "%s is year %d in UTC: a start time is within years 0000 to 9999 in UTC", strictjson.QuoteCut(*d.StartsAt, maxEchoBytes), y)
		}
		if s.Scheduled {
			return nil, es.Refuse(aggregateField, "show %s is already scheduled (%q at %s, version %d)", cmd.AggregateID, s.Title, s.StartsAt, version)
		}
		return []es.NewEvent{{Type: EvShowScheduled, Data: ShowScheduled{Title: *d.Title, StartsAt: at.UTC().Format(timeLayoutStartAt),
			Rows: rows, SeatsPerRow: seatsPerRow}}}, nil

	case CmdReserveSeats:
		var d struct {
			ReservationID *string         `json:"reservationId"`
			CustomerID    *string         `json:"customerId"`
			Seats         json.RawMessage `json:"seats"`
			Holder        *Holder         `json:"holder"`
		}
		if err := decode(cmd.Data, &d); err != nil {
			return nil, err
		}
		rid, err := id("data.reservationId", d.ReservationID)
		if err != nil {
			return nil, err
		}
		cid, err := id("data.customerId", d.CustomerID)
		if err != nil {
			return nil, err
		}
		seats, err := seatList(d.Seats)
		if err != nil {
			return nil, err
		}
		if d.Holder != nil {
			if err := checkText("data.holder.name", d.Holder.Name, maxHolderName); err != nil {
				return nil, err
			}
			if err := checkText("data.holder.email", d.Holder.Email, maxHolderEmail); err != nil {
				return nil, err
			}
		}
		if err := scheduled(s, cmd); err != nil {
			return nil, err
		}
		if _, ok := s.Reservations[rid]; ok {
			return nil, es.Refuse("data.reservationId", "reservation %s is already active on show %s", rid, cmd.AggregateID)
		}
		if err := free(s, seats, ""); err != nil {
			return nil, err
		}
		ev := es.NewEvent{Type: EvSeatsReserved, Data: SeatsChanged{ReservationID: rid, CustomerID: cid, Seats: seats}}
		if d.Holder != nil && (d.Holder.Name != "" || d.Holder.Email != "") {
			ev.Personal, ev.Subject = d.Holder, cid
		}
		return []es.NewEvent{ev}, nil

	case CmdCancelReservation:
		var d struct {
			ReservationID *string `json:"reservationId"`
		}
		if err := decode(cmd.Data, &d); err != nil {
			return nil, err
		}
		rid, err := id("data.reservationId", d.ReservationID)
		if err != nil {
			return nil, err
		}
		if err := scheduled(s, cmd); err != nil {
			return nil, err
		}
		r, ok := s.Reservations[rid]
		if !ok {
			return nil, es.Refuse("data.reservationId", "show %s has no active reservation %s", cmd.AggregateID, rid)
		}
		return []es.NewEvent{{Type: EvReservationCancelled, Data: SeatsChanged{ReservationID: rid, CustomerID: r.CustomerID, Seats: r.Seats}}}, nil

	case CmdMoveReservation:
		var d struct {
			ReservationID *string         `json:"reservationId"`
			Seats         json.RawMessage `json:"seats"`
		}
		if err := decode(cmd.Data, &d); err != nil {
			return nil, err
		}
		rid, err := id("data.reservationId", d.ReservationID)
		if err != nil {
			return nil, err
		}
		seats, err := seatList(d.Seats)
		if err != nil {
			return nil, err
		}
		if err := scheduled(s, cmd); err != nil {
			return nil, err
		}
		r, ok := s.Reservations[rid]
		if !ok {
			return nil, es.Refuse("data.reservationId", "show %s has no active reservation %s", cmd.AggregateID, rid)
		}
		if slices.Equal(slices.Sorted(slices.Values(r.Seats)), slices.Sorted(slices.Values(seats))) {
			return nil, es.Refuse("data.seats", "reservation %s already holds exactly these seats", rid)
		}
		if err := free(s, seats, rid); err != nil {
			return nil, err
		}
		// Two events, appended in one transaction: the reservation never
		// exists without seats, and no other command takes its old seats
		// before it has the new ones.
		return []es.NewEvent{
			{Type: EvReservationCancelled, Data: SeatsChanged{ReservationID: rid, CustomerID: r.CustomerID, Seats: r.Seats}},
			{Type: EvSeatsReserved, Data: SeatsChanged{ReservationID: rid, CustomerID: r.CustomerID, Seats: seats}},
		}, nil
	}
	return nil, es.Invalid("type", "%q is not a command (%s, %s, %s, %s)", cmd.Type, CmdScheduleShow, CmdReserveSeats, CmdCancelReservation, CmdMoveReservation)
}

// scheduled refuses a command on a show that was never scheduled.
func scheduled(s Show, cmd es.Command) error {
	if !s.Scheduled {
		return es.Refuse(aggregateField, "show %s is not scheduled", cmd.AggregateID)
	}
	return nil
}

// free refuses seats that do not exist or that a reservation other than
// own holds (no double booking).
func free(s Show, seats []string, own string) error {
	for i, seat := range seats {
		field := fmt.Sprintf("data.seats[%d]", i)
		if !s.exists(seat) {
			return es.Refuse(field, "seat %s does not exist (rows A to %c, seats 1 to %d)", seat, 'A'+s.Rows-1, s.SeatsPerRow)
		}
		if r, taken := s.Seats[seat]; taken && r != own {
			return es.Refuse(field, "seat %s is already reserved", seat)
		}
	}
	return nil
}

// decode reads a command's data into v (es.DecodeData): a field v does
// not have, at any depth (a misspelt holder field included), or a value of
// the wrong type is refused naming it.
func decode(data json.RawMessage, v any) error { return es.DecodeData(data, v) }

// wholeNumber reads a required count from 1 to max, refusing any other
// value (a fraction, 1.0, 1e400, a string) quoting that range and what was
// sent; why says what the range is ("rows A to Z").
func wholeNumber(field string, raw json.RawMessage, max int, why string) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, es.Invalid(field, "is required: must be a whole number from 1 to %d%s", max, why)
	}
	n, reason := strictjson.WholeNumber(raw, 1, int64(max))
	if reason != "" {
		return 0, es.Invalid(field, "%s%s", reason, why)
	}
	return int(n), nil
}

// id reads a required reservation or customer id.
func id(field string, v *string) (string, error) {
	if v == nil || *v == "" {
		return "", es.Invalid(field, "is required")
	}
	if err := es.CheckAggregateID(*v); err != nil || len(*v) > maxIDLength {
		return "", es.Invalid(field, "%s: 1 to %d letters, digits, - _ . :", strictjson.QuoteCut(*v, maxEchoBytes), maxIDLength)
	}
	return *v, nil
}

// seatList reads 1 to MaxSeatsPerCmd seat labels, each once.
func seatList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, es.Invalid("data.seats", "is required: a list of 1 to %d seats such as [\"A1\", \"A2\"]", MaxSeatsPerCmd)
	}
	var seats []string
	if err := json.Unmarshal(raw, &seats); err != nil {
		return nil, es.Invalid("data.seats", "must be a list of seat labels such as [\"A1\", \"A2\"]")
	}
	if len(seats) == 0 || len(seats) > MaxSeatsPerCmd {
		return nil, es.Invalid("data.seats", "lists %d seats: 1 to %d per command", len(seats), MaxSeatsPerCmd)
	}
	for i, seat := range seats {
		if _, _, ok := parseSeat(seat); !ok {
			return nil, es.Invalid(fmt.Sprintf("data.seats[%d]", i), "%s is not a seat (a row letter A-Z and a number, such as C12)", strictjson.QuoteCut(seat, maxEchoBytes))
		}
		if j := slices.Index(seats, seat); j < i {
			return nil, es.Invalid(fmt.Sprintf("data.seats[%d]", i), "seat %s is listed twice (also data.seats[%d])", seat, j)
		}
	}
	return seats, nil
}

// checkText refuses a title or holder field, naming it, that is more than
// max characters or holds a control character (which, and where).
func checkText(field, s string, max int) error {
	if n := utf8.RuneCountInString(s); n > max {
		return es.Invalid(field, "is %d characters; at most %d, no control characters", n, max)
	}
	i := 0
	for _, r := range s {
		i++
		if isControl(r) {
			return es.Invalid(field, "holds control character %U (character %d); at most %d characters, no control characters", r, i, max)
		}
	}
	return nil
}

// isControl is a control character (Unicode Cc): C0, DEL and C1 (NEL,
// CSI, ...), which break lines and start terminal escapes where a title or
// name is shown.
func isControl(r rune) bool { return unicode.IsControl(r) }
