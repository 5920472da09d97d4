// Package seats is the event-sourced sample domain: seat reservations for
// shows, where validation matters (no seat is ever booked twice).
//
// A show is an aggregate (package es). Its commands and the events they
// become:
//
//	ScheduleShow      {title, startsAt, rows 1–26, seatsPerRow 1–40}   → ShowScheduled
//	ReserveSeats      {reservationId, customerId, seats [1–10], holder?} → SeatsReserved (holder: personal data, kept apart)
//	CancelReservation {reservationId}                                  → ReservationCancelled
//	MoveReservation   {reservationId, seats}                           → ReservationCancelled + SeatsReserved, in one transaction
//
// A command's data is decoded with es.DecodeData: a field it does not have,
// at any depth ("data.holder.nmae: unknown field; did you mean
// \"name\"?"), or a value of the wrong type is invalid (400), never
// dropped; text that is not UTF-8 was refused before (es.ParseCommand).
//
// Decide refuses (422, naming the field) a command the show's state does not
// allow: a seat that is taken or does not exist, a reservation that is not
// active, a show not scheduled or scheduled twice. Evolve refuses an event
// that would book a seat twice, so a log with a double booking cannot even
// be loaded.
//
// # Views, and which are which
//
// Three views of the same log share one versioned views table (the SSM
// parameter names the current version; package projection rebuilds it):
//
//   - the seat map of a show (GET /shows/{id}) is written by each command in
//     the same TransactWriteItems as its events. It is the view a customer
//     reads right after booking, and the one the next customer picks seats
//     from: if it lagged, people would see their own booking missing and
//     pick seats that are gone, and be refused. It is never behind the
//     answer that carried its version (except within a rebuild's handover,
//     where minVersion still waits for it).
//   - availability (free seats per show, and per day across shows through
//     the byDay index) and each customer's bookings across shows are
//     projected from the published stream. They are for browsing, where a
//     second of lag is harmless, and keeping them out of the transaction
//     keeps commands small and lets views be added without touching the
//     command side. A client that must see its own write passes the
//     version its command returned as minVersion: the read waits (bounded)
//     until the view holds it.
package seats
